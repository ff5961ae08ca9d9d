"""The real API over HTTP without Ray: routes, middleware, the store and the validator
worker process, with a launcher that reaches no cluster and records what would launch."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI

from tuner.api import create_app
from tuner.launcher import Launcher
from tuner.settings import Settings
from tuner.store import Store


class RecordingLauncher(Launcher):
    """A Launcher with no cluster (no TUNER_RAY_ADDRESS, never started): the nodes are
    unknown, and a submit is recorded and refused."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self.submitted: list[tuple[str, str]] = []

    def start(self, num_cpus: int | None = None, wait_s: float = 90) -> str:
        raise AssertionError("a unit test must not start Ray")

    def submit(self, experiment_id: str, job_id: str, resume: bool) -> str:
        self.submitted.append((experiment_id, job_id))
        raise AssertionError(f"sweep {experiment_id} was launched")


@pytest.fixture(scope="session")
def validator_probe_file(tmp_path_factory) -> Path:
    """Where tests/probe_import.py leaves its mark if the validator worker imports it."""
    return tmp_path_factory.mktemp("validator-probe") / "imported"


@pytest.fixture(scope="session")
def spec_validator(validator_probe_file) -> Iterator[Any]:
    """One validator worker process (RLlib loads once) for every HTTP test; it marks
    `validator_probe_file` if it ever imports tests/probe_import.py."""
    from tuner.api._validator import Validator

    with pytest.MonkeyPatch.context() as env:  # the worker is spawned with this environment
        env.setenv("TUNER_PROBE_FILE", str(validator_probe_file))
        validator = Validator([])
    yield validator
    validator.close()


@pytest.fixture
def service_app(tmp_path, spec_validator) -> Iterator[Callable[..., FastAPI]]:
    """A factory: service_app(**settings) -> the app as `tuner serve` builds it (settings
    from the arguments, data under tmp_path), its store open, the shared validator worker
    with this app's allowed modules and limits, and a RecordingLauncher
    (app.state.launcher.submitted). Use TestClient(app, base_url="http://127.0.0.1")
    without `with`: no lifespan, so no Ray."""
    stores: list[Store] = []

    def build(**settings: Any) -> FastAPI:
        cfg = Settings(data_dir=tmp_path, **settings)
        app = create_app(cfg)
        app.state.store = Store(cfg.store_url)
        stores.append(app.state.store)
        validator = copy.copy(spec_validator)  # the same worker, this app's settings
        validator.allowed = cfg.allowed_module_list
        validator.max_trials = cfg.max_trials
        validator.max_asha_rungs = cfg.max_asha_rungs
        app.state.validator = validator
        app.state.launcher = RecordingLauncher(cfg)
        app.state.wake = lambda: None
        return app

    yield build
    for store in stores:
        store.close()
