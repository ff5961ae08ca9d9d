"""Concurrent status changes of one sweep are serialized (the losers get 409, never a
500) and the service's limits are refused with the limit named."""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor

import pytest
from fastapi.testclient import TestClient

from tuner import service
from tuner.api import create_app
from tuner.settings import Settings
from tuner.spec import SpecError, parse_spec
from tuner.store import Store

SPEC = {"name": "race", "algorithm": "PPO", "env": "CartPole-v1"}


@pytest.fixture
def app(tmp_path):
    app = create_app(Settings(data_dir=tmp_path, max_active_sweeps=3))
    app.state.store = Store(f"sqlite:///{tmp_path / 'tuner.db'}")
    app.state.wake = lambda: None
    yield app
    app.state.store.close()


@pytest.mark.parametrize("start", ["QUEUED", "RUNNING", "STOPPED", "FAILED"])
def test_twelve_stop_resume_delete_at_once_never_500(app, start):
    store: Store = app.state.store
    rec = service.submit(store, SPEC, [])
    store.update_experiment(rec.id, status=start)
    requests = [("POST", "stop"), ("POST", "resume"), ("DELETE", "")] * 4
    random.Random(start).shuffle(requests)

    def call(req: tuple[str, str]) -> int:
        method, action = req
        path = f"/api/v1/experiments/{rec.id}" + (f"/{action}" if action else "")
        client = TestClient(app, base_url="http://127.0.0.1")  # no lifespan: no Ray
        return client.request(method, path).status_code

    with ThreadPoolExecutor(12) as pool:
        codes = list(pool.map(call, requests))
    assert set(codes) <= {202, 204, 404, 409}, codes
    assert 409 in codes or 404 in codes  # somebody lost a race or found it gone
    after = store.get_experiment(rec.id)
    if 204 in codes:
        assert after is None  # deleted exactly once
    else:
        assert after is not None and after.status in {"QUEUED", "STOPPED", "STOPPING", "FAILED"}


def test_too_many_active_sweeps_is_429_naming_the_limit(app):
    store: Store = app.state.store
    for _ in range(3):
        service.submit(store, SPEC, [])
    with pytest.raises(service.TooMany, match="TUNER_MAX_ACTIVE_SWEEPS"):
        service.submit(store, SPEC, [], max_active=3)
    assert store.count_by_status({"QUEUED"}) == 3  # nothing stored


def test_asha_rungs_are_limited():
    too_many = {"type": "asha", "grace_period": 1, "max_t": 10**9, "reduction_factor": 1.5}
    with pytest.raises(SpecError) as err:
        parse_spec({**SPEC, "scheduler": too_many})
    assert err.value.issues[0].loc == "scheduler" and "rungs" in err.value.issues[0].msg
    parse_spec({**SPEC, "scheduler": {"type": "asha", "grace_period": 1, "max_t": 1000}})
