# Two commands on a fresh machine: `make run` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
export RAY_AUTH_MODE ?= token
export RAY_USAGE_STATS_ENABLED ?= 0
export TUNER_DATA_DIR ?= $(HOME)/.tuner

.PHONY: setup run test lint format unit integration e2e schemathesis bench clean mlflow-ui images

$(VENV)/.installed: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip setuptools wheel
	# torch pinned to the local CPU build through constraints.txt (CI and make only)
	$(PY) -m pip install -q -c constraints.txt -e '.[dev]'
	touch $@

# System packages the suite needs: a PostgreSQL server (store tests) and Debian's
# Chromium for the browser test. Installed once; skipped when already present.
.system-deps:
	@if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || ! command -v chromium >/dev/null; then \
		if [ "$$(id -u)" = 0 ]; then \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql chromium >/dev/null; \
		else \
			echo "note: install postgresql and chromium (apt) for the Postgres and browser tests"; \
		fi; \
	fi
	@touch $@

setup: $(VENV)/.installed

lint: setup
	$(VENV)/bin/ruff check tuner tests bench experiments
	$(VENV)/bin/ruff format --check tuner tests bench experiments

format: setup
	$(VENV)/bin/ruff check --fix tuner tests bench experiments
	$(VENV)/bin/ruff format tuner tests bench experiments

# Two workers that take the next test as each frees (--dist worksteal): the suite waits on
# Ray heads, servers and browsers as much as it computes (14:11 vs 21.7 min serial).
test: setup .system-deps lint
	$(VENV)/bin/pytest -p no:cacheprovider -n 2 --dist worksteal tests

# The service with embedded defaults: API + web page on :8000, MLflow UI on :5000,
# a local Ray head, SQLite store; everything under TUNER_DATA_DIR. TUNER_PORT and
# TUNER_MLFLOW_PORT (environment or `make run TUNER_PORT=8001`) pick other ports.
TUNER_PORT ?= 8000
TUNER_MLFLOW_PORT ?= 5000
run: setup
	$(VENV)/bin/tuner serve --host 127.0.0.1 --port $(TUNER_PORT) --mlflow-ui --mlflow-port $(TUNER_MLFLOW_PORT)

mlflow-ui: setup
	@mkdir -p "$(TUNER_DATA_DIR)"
	$(VENV)/bin/mlflow server --host 127.0.0.1 --port $(TUNER_MLFLOW_PORT) \
		--backend-store-uri "sqlite:///$(TUNER_DATA_DIR)/mlflow.db" \
		--default-artifact-root "file://$(TUNER_DATA_DIR)/mlflow-artifacts"

unit: setup
	$(VENV)/bin/pytest -q tests/unit

integration: setup
	$(VENV)/bin/pytest -q tests/integration

e2e: setup .system-deps
	$(VENV)/bin/pytest -q tests/e2e

# `schemathesis run` (tests/e2e/schemathesis.toml: every phase and check) against a real
# `tuner serve` in a temporary data dir: no failure, every operation reached with real ids.
schemathesis: setup
	$(VENV)/bin/pytest -q -p no:cacheprovider tests/e2e/test_schema.py -k schemathesis_run

bench: setup
	$(PY) bench/run_all.py

# The four images docker/compose.yaml runs, with docker or podman (--format docker keeps
# the HEALTHCHECKs under podman). Build args: PIP_INDEX_URL, PIP_EXTRA_INDEX_URL,
# TORCH_INDEX_URL (a private mirror: docs/deploy.md), e.g.
#   make images BUILD_ARGS="--build-arg PIP_INDEX_URL=https://mirror/simple"
IMAGE_TAG ?= latest
ENGINE ?= $(shell command -v docker 2>/dev/null || command -v podman 2>/dev/null)
images:
	@test -n "$(ENGINE)" || { echo "make images: needs docker or podman"; exit 2; }
	@fmt=$$(case "$(ENGINE)" in *podman) echo "--format docker";; esac); \
	for image in api ray gpu-worker mlflow; do \
		"$(ENGINE)" build $$fmt $(BUILD_ARGS) -f docker/Dockerfile.$$image \
			-t tuner-$$image:$(IMAGE_TAG) . || exit 1; \
	done

clean:
	rm -rf $(VENV) .pytest_cache
