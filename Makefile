# The two commands the README starts with. Both set up a virtual environment
# (.venv) from nothing, installing everything from the package registries.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: setup demo test test-fast

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# The demo needs the package alone; the tests add their extras (test: pytest and the
# independent checks; beam: the Apache Beam pipeline's tests).
$(VENV)/.installed-demo: setup.py | $(BIN)/python
	$(BIN)/python -m pip install -q -e .
	touch $@

$(VENV)/.installed-test: setup.py | $(BIN)/python
	$(BIN)/python -m pip install -q -e ".[test,beam]"
	touch $@ $(VENV)/.installed-demo

setup: $(VENV)/.installed-test

demo: $(VENV)/.installed-demo
	$(BIN)/albert-tf demo

# Two workers (pytest-xdist), one per core, each test module on one of them: the suite
# keeps both cores busy (97-98% measured), so more workers would not finish sooner. The
# modules start longest first, in the order collected (tests/helpers/module_order.py).
TEST_WORKERS := -n 2 --dist loadfile --no-loadscope-reorder

# The linter first (ruff.toml), then the suite; the slowest tests are listed at the end.
test: $(VENV)/.installed-test
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q $(TEST_WORKERS) --durations=25 --junitxml=$(VENV)/last-test-run.xml tests

test-fast: $(VENV)/.installed-test
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q $(TEST_WORKERS) -m "not slow" tests
