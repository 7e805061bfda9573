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

test: setup
	$(BIN)/python -m pytest -q tests

test-fast: setup
	$(BIN)/python -m pytest -q -m "not slow" tests
