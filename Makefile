# The two commands the README starts with. Both set up a virtual environment
# (.venv) from nothing, installing everything from the package registries.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: setup demo test test-fast

$(BIN)/albert-tf: setup.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e ".[test,serving,beam]"
	touch $@

setup: $(BIN)/albert-tf

demo: setup
	$(BIN)/albert-tf demo

# Two workers (pytest-xdist), each test module on one of them: the suite is as much
# waiting (subprocesses, I/O, single-threaded Python) as computing.
TEST_WORKERS := -n 2 --dist loadfile

test: setup
	$(BIN)/python -m pytest -q $(TEST_WORKERS) tests

test-fast: setup
	$(BIN)/python -m pytest -q $(TEST_WORKERS) -m "not slow" tests
