# Two commands on a fresh machine: `make run` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
export RAY_AUTH_MODE ?= token
export RAY_USAGE_STATS_ENABLED ?= 0

.PHONY: setup run test lint format unit integration e2e bench clean

$(VENV)/.installed: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip setuptools wheel
	# torch pinned to the local CPU build through constraints.txt (CI and make only)
	$(PY) -m pip install -q -c constraints.txt -e '.[dev]'
	touch $@

setup: $(VENV)/.installed

lint: setup
	$(VENV)/bin/ruff check tuner tests bench
	$(VENV)/bin/ruff format --check tuner tests bench

format: setup
	$(VENV)/bin/ruff check --fix tuner tests bench
	$(VENV)/bin/ruff format tuner tests bench

test: setup lint
	$(VENV)/bin/pytest -q -p no:cacheprovider tests

unit: setup
	$(VENV)/bin/pytest -q tests/unit

integration: setup
	$(VENV)/bin/pytest -q tests/integration

bench: setup
	$(PY) bench/run_all.py

clean:
	rm -rf $(VENV) .pytest_cache
