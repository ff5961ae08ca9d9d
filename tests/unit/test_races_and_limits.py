"""Concurrent status changes of one sweep are serialized (the losers get 409, never a
500) and the service's limits are refused with the limit named."""

from __future__ import annotations

import json
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event

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
        assert after is not None
        assert after.status in {"QUEUED", "STOPPED", "STOPPING", "FAILED"}


def test_too_many_active_sweeps_is_429_naming_the_limit(app):
    store: Store = app.state.store
    for _ in range(3):
        service.submit(store, SPEC, [])
    with pytest.raises(service.TooMany, match="TUNER_MAX_ACTIVE_SWEEPS"):
        service.submit(store, SPEC, [], max_active=3)
    assert store.count_by_status({"QUEUED"}) == 3  # nothing stored


def _slow_statements(store: Store) -> None:
    """Every SQL statement takes 5 ms longer: a window between a count and an insert that
    are not one transaction is then wide enough for the racers to get in."""
    event.listen(store.engine, "before_cursor_execute", lambda *args: time.sleep(0.005))


@pytest.mark.parametrize("stores", ["one store", "a store each"])
def test_concurrent_submits_never_exceed_the_active_limit(tmp_path, stores):
    """16 submissions at once, 3 already active, a limit of 5: exactly 2 are stored, the
    other 14 are TooMany naming TUNER_MAX_ACTIVE_SWEEPS. "a store each": an engine per
    thread, as API processes sharing one database have (the database's lock decides,
    not a lock of this process)."""
    url = f"sqlite:///{tmp_path / 'tuner.db'}"
    shared = Store(url)
    for status in ("QUEUED", "RUNNING", "STOPPING"):
        rec = service.submit(shared, SPEC, [])
        shared.update_experiment(rec.id, status=status)
    done = service.submit(shared, SPEC, [])
    shared.update_experiment(done.id, status="SUCCEEDED")  # a finished sweep does not count
    racers = 16
    own = [Store(url) for _ in range(racers)] if stores == "a store each" else []
    for store in [shared, *own]:
        _slow_statements(store)
    start = threading.Barrier(racers)

    def submit(i: int) -> str:
        store = own[i] if own else shared
        start.wait()
        try:
            return service.submit(store, SPEC, [], max_active=5).id
        except service.TooMany as err:
            return f"refused: {err}"

    try:
        with ThreadPoolExecutor(racers) as pool:
            results = list(pool.map(submit, range(racers)))
        stored = [r for r in results if not r.startswith("refused")]
        refused = [r for r in results if r.startswith("refused")]
        assert len(stored) == 2, results
        assert all("at most 5 (TUNER_MAX_ACTIVE_SWEEPS)" in r for r in refused), refused
        assert shared.count_by_status({"QUEUED", "RUNNING", "STOPPING"}) == 5
        assert {shared.get_experiment(e).status for e in stored} == {"QUEUED"}
    finally:
        for store in [shared, *own]:
            store.close()


def test_too_many_active_sweeps_over_http_is_429_naming_the_limit(service_app):
    """TUNER_MAX_ACTIVE_SWEEPS counts queued and running sweeps per token; the service has
    one token (TUNER_API_TOKEN), so per service."""
    app = service_app(max_active_sweeps=2, api_token="t0ken")
    client = TestClient(app, base_url="http://127.0.0.1")
    auth = {"Authorization": "Bearer t0ken"}
    store: Store = app.state.store
    first = client.post("/api/v1/experiments", json=SPEC, headers=auth)
    assert first.status_code == 201, first.text
    service.submit(store, SPEC, [])
    refused = client.post("/api/v1/experiments", json=SPEC, headers=auth)
    assert refused.status_code == 429
    (problem,) = refused.json()["detail"]
    assert "TUNER_MAX_ACTIVE_SWEEPS" in problem["msg"]
    assert "at most 2" in problem["msg"]
    assert client.get("/api/v1/experiments", headers=auth).json()["total"] == 2
    client.post(f"/api/v1/experiments/{first.json()['id']}/stop", headers=auth)  # QUEUED: STOPPED
    assert client.post("/api/v1/experiments", json=SPEC, headers=auth).status_code == 201
    assert app.state.launcher.submitted == []


FORTY_RUNGS = {"type": "asha", "grace_period": 1, "max_t": 2**39, "reduction_factor": 2}


def test_asha_rungs_are_limited_by_a_setting(service_app):
    assert parse_spec({**SPEC, "scheduler": FORTY_RUNGS}).scheduler.asha_rungs() == 40
    client = TestClient(service_app(), base_url="http://127.0.0.1")
    refused = client.post("/api/v1/experiments", json={**SPEC, "scheduler": FORTY_RUNGS})
    assert refused.status_code == 422
    (problem,) = refused.json()["detail"]
    assert problem["loc"] == "scheduler"
    assert problem["value"] == 40
    assert "TUNER_MAX_ASHA_RUNGS" in problem["msg"]
    assert "at most 30" in problem["msg"]
    assert client.get("/api/v1/experiments").json()["total"] == 0
    roomy = TestClient(service_app(max_asha_rungs=40), base_url="http://127.0.0.1")
    accepted = roomy.post("/api/v1/experiments", json={**SPEC, "scheduler": FORTY_RUNGS})
    assert accepted.status_code == 201, accepted.text


def test_asha_rung_limit_in_validate_spec():
    from tuner.validation import validate_spec

    spec = parse_spec({**SPEC, "scheduler": FORTY_RUNGS})
    with pytest.raises(SpecError) as err:
        validate_spec(spec, build_env=False, max_asha_rungs=39)
    assert [i.loc for i in err.value.issues] == ["scheduler"]
    validate_spec(spec, build_env=False, max_asha_rungs=40)
    assert Settings().max_asha_rungs == 30


@pytest.mark.parametrize("path", ["", "/metrics", "/trials"])
def test_polled_views_are_served_from_the_cache_within_its_ttl(service_app, path):
    """Two polls of one view within TUNER_VIEW_CACHE_S cost one store read."""
    app = service_app(view_cache_s=60)
    store: Store = app.state.store
    rec = service.submit(store, SPEC, [])
    reads: list[str] = []
    get_experiment = store.get_experiment

    def counted(experiment_id: str):
        reads.append(experiment_id)
        return get_experiment(experiment_id)

    store.get_experiment = counted  # type: ignore[method-assign]
    client = TestClient(app, base_url="http://127.0.0.1")
    url = f"/api/v1/experiments/{rec.id}{path}"
    first, second = client.get(url), client.get(url)
    assert first.status_code == second.status_code == 200
    assert first.content == second.content
    assert reads == [rec.id]  # the second answer came from the cache
    client.post(f"/api/v1/experiments/{rec.id}/stop")  # a write drops the sweep's views
    reads.clear()
    after = client.get(url)
    assert reads
    assert reads[0] == rec.id
    if not path:
        assert after.json()["status"] == "STOPPED"


def test_the_cli_applies_the_asha_rung_limit_too(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from tuner.cli import app as cli

    path = tmp_path / "spec.json"
    path.write_text(json.dumps({**SPEC, "scheduler": FORTY_RUNGS}))
    refused = CliRunner().invoke(cli, ["validate", str(path), "--no-env", "--no-fit"])
    assert refused.exit_code == 2
    assert "TUNER_MAX_ASHA_RUNGS" in refused.output
    monkeypatch.setenv("TUNER_MAX_ASHA_RUNGS", "40")
    allowed = CliRunner().invoke(cli, ["validate", str(path), "--no-env", "--no-fit"])
    assert allowed.exit_code == 0, allowed.output
