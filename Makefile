# Two commands on a fresh machine: `make run` and `make test`. Both install from the lock
# file, requirements.lock (pip constraints kept by pip-compile: `make lock` renews it), so a
# fresh machine runs what was tested; `make test-latest` runs the newest the ranges allow.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
CONFIG ?= schedules.yaml
PORT   ?= 8080

LOCK    = requirements.lock

.PHONY: run test test-latest lock install install-arq bench chaos lint clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.installed: $(BIN)/python pyproject.toml $(LOCK)
	$(BIN)/python -m pip install -q -c $(LOCK) -e '.[test]'
	touch $@

install: $(VENV)/.installed

# arq pins redis-py below 6, which the main venv is past: arq's tests run its worker, and
# the cronsvc worker that sends into it, from a venv of their own on a lock of their own.
ARQ_VENV = .venv-arq
ARQ_LOCK = requirements-arq.lock

$(ARQ_VENV)/bin/python:
	$(PYTHON) -m venv $(ARQ_VENV)
	$(ARQ_VENV)/bin/python -m pip install -q --upgrade pip

$(ARQ_VENV)/.installed: $(ARQ_VENV)/bin/python pyproject.toml $(ARQ_LOCK)
	$(ARQ_VENV)/bin/python -m pip install -q -c $(ARQ_LOCK) -e '.[arq,test]'
	touch $@

install-arq: $(ARQ_VENV)/.installed

# The dashboard on 127.0.0.1:$(PORT): `make run PORT=8090` when 8080 is taken.
run: install
	$(BIN)/cronsvc up --config $(CONFIG) --web-port $(PORT)

# Two processes (pytest-xdist), each with its own redis-server and brokers: most tests
# wait on real processes and clocks, not the CPU. A file's tests stay in one process.
PYTEST_JOBS ?= -n 2 --dist loadfile

test: install install-arq
	$(BIN)/python -m pytest -q $(PYTEST_JOBS)

# The suite on the newest versions pyproject.toml's ranges allow, in a venv of its own:
# drift shows here first, as a known failure, not on a fresh machine one morning.
LATEST ?= .venv-latest
test-latest:
	$(PYTHON) -m venv $(LATEST)
	$(LATEST)/bin/python -m pip install -q --upgrade pip
	$(LATEST)/bin/python -m pip install -q --upgrade --upgrade-strategy eager -e '.[test]'
	$(LATEST)/bin/python -m pip list --format=freeze > $(LATEST)/versions.txt
	$(LATEST)/bin/python -m pytest -q -p no:cacheprovider $(PYTEST_JOBS)

# Resolve pyproject.toml's ranges again into the lock files (the newest that fit).
lock: install
	$(BIN)/python -m pip install -q -c $(LOCK) -e '.[dev]'
	$(BIN)/pip-compile -q --upgrade --extra test --extra dev --strip-extras --allow-unsafe \
		--no-emit-index-url --no-emit-find-links -o $(LOCK) pyproject.toml
	$(BIN)/pip-compile -q --upgrade --extra arq --extra test --strip-extras --allow-unsafe \
		--no-emit-index-url --no-emit-find-links -o $(ARQ_LOCK) pyproject.toml

bench: install
	$(BIN)/python bench/run.py

# The mixed chaos scenario (every fault at random), or CHAOS_SCENARIO=dispatch or reload,
# for CHAOS_SECONDS, with its totals.
CHAOS_SECONDS ?= 600
CHAOS_SCENARIO ?= mixed
chaos: install
	CRONSVC_CHAOS_SECONDS=$(CHAOS_SECONDS) $(BIN)/python -m pytest -q -s -p no:cacheprovider \
		--basetemp=$${TMPDIR:-/tmp}/cronsvc-chaos -m chaos -k $(CHAOS_SCENARIO) tests/chaos

# ruff, mypy and the layer contracts of pyproject.toml (import-linter).
lint: install
	$(BIN)/python -m pip install -q -c $(LOCK) -e '.[dev]'
	$(BIN)/ruff check cronsvc tests bench
	$(BIN)/mypy cronsvc
	$(BIN)/lint-imports

clean:
	rm -rf $(VENV) $(ARQ_VENV) $(LATEST) .cronsvc .pytest_cache build dist
