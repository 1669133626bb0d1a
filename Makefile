# Targets list themselves: `make help`.
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: help install up test test-fast lint typecheck bench soak

help:  ## this list
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

$(PY):
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt
	$(PY) -m pip install --quiet --no-deps -e .

install: $(PY)  ## create .venv with pinned dependencies and the pin package

up: $(PY)  ## run the whole system (embedded PostgreSQL and broker unless configured)
	$(VENV)/bin/pin up

test: $(PY)  ## the whole test suite against real PostgreSQL and a real broker (embedded by default)
	$(PY) -m pytest

test-fast: $(PY)  ## unit tests only (no database, no broker)
	$(PY) -m pytest -m unit

lint: $(PY)  ## ruff
	$(VENV)/bin/ruff check src tests bench

typecheck: $(PY)  ## mypy strict
	$(VENV)/bin/mypy

bench: $(PY)  ## benchmarks with baselines side by side (bench/README.md)
	$(PY) -m bench

soak: $(PY)  ## the long fault-injection soak (tests/soak)
	$(PY) -m pytest tests/soak --soak-long -s
