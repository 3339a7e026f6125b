# Two commands on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
CONFIG ?= schedules.yaml

.PHONY: run test install bench chaos lint clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.installed: $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $@

install: $(VENV)/.installed

run: install
	$(BIN)/cronsvc up --config $(CONFIG)

test: install
	$(BIN)/python -m pytest -q

bench: install
	$(BIN)/python bench/run.py

# The mixed chaos scenario for CHAOS_SECONDS (every fault at random), with its totals.
CHAOS_SECONDS ?= 600
chaos: install
	CRONSVC_CHAOS_SECONDS=$(CHAOS_SECONDS) $(BIN)/python -m pytest -q -s -p no:cacheprovider \
		--basetemp=$${TMPDIR:-/tmp}/cronsvc-chaos -m chaos -k mixed tests/chaos

# ruff, mypy and the layer contracts of pyproject.toml (import-linter).
lint: install
	$(BIN)/python -m pip install -q -e '.[dev]'
	$(BIN)/ruff check cronsvc tests bench
	$(BIN)/mypy cronsvc
	$(BIN)/lint-imports

clean:
	rm -rf $(VENV) .cronsvc .pytest_cache build dist
