# The two set-up commands: `make demo` and `make test`. Everything installs into .venv.
PYTHON ?= $(shell command -v python3.11 2>/dev/null || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin
PACKAGES := contracts host runner execution_system
# pytest workers (pytest-xdist): one per core. Most tests wait on real processes and
# fsync, so two workers on two cores finish the suite far sooner than one.
WORKERS ?= auto

.PHONY: demo test check lint types layers unit install clean bench mutate

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

install: $(VENV)/.installed

demo: $(VENV)/.installed
	$(BIN)/execsys demo

lint: $(VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

types: $(VENV)/.installed
	$(BIN)/mypy --strict $(PACKAGES)

layers: $(VENV)/.installed
	$(BIN)/lint-imports

unit: $(VENV)/.installed
	$(BIN)/pytest -q -m "not slow" -p no:cacheprovider -n $(WORKERS) --dist worksteal

# Fast inner loop: lint, types, layers, everything but the slow crash/race loops.
check: lint types layers unit

# The full gate CI runs.
test: lint types layers
	$(BIN)/pytest -q -p no:cacheprovider -n $(WORKERS) --dist worksteal

# Hand-written mutants of the rule modules, each run against the tests that guard it,
# on a private copy of the tree (never the working tree). CPU-heavy; not part of `test`.
mutate: $(VENV)/.installed
	$(PY) -m tests.mutation

bench: $(VENV)/.installed  ## every benchmark at a reduced size (bench/run_all.py --full for the documented sizes)
	$(PY) bench/run_all.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
