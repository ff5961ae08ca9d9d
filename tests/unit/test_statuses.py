"""A sweep's and a trial's statuses are defined once (tuner/statuses.py): no other module
of tuner/ spells a status or a list of them, the web page asks the server for them, the
OpenAPI schema declares them as enums, and what is stored and sent are the plain words."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

import tuner
from tests.source import strings
from tuner import statuses
from tuner.api import create_app
from tuner.settings import Settings
from tuner.statuses import SweepStatus, TrialStatus
from tuner.store import TRANSITIONS, Store
from tuner.views import ExperimentView, StatusList, SweepSummary, TrialView

PACKAGE = Path(tuner.__file__).parent
STATIC = PACKAGE / "api" / "static"
WORDS = {s.value for s in SweepStatus} | {s.value for s in TrialStatus}
WORD = re.compile(r"\b(" + "|".join(sorted(WORDS)) + r")\b")

# (module, word): where a status word is another vocabulary's, spelled as that one's owner
NOT_A_STATUS = {
    ("launcher/_jobs.py", "STOPPED"): "Ray's JobStatus, read over the Jobs REST API (no Ray)",
    ("launcher/_jobs.py", "SUCCEEDED"): "Ray's JobStatus, read over the Jobs REST API (no Ray)",
    ("launcher/_jobs.py", "FAILED"): "Ray's JobStatus, read over the Jobs REST API (no Ray)",
}
# modules whose status words never change: a migration is history
FROZEN = ("store/migrations/",)
# modules whose strings may name statuses in prose (a list there drives nothing)
PROSE = {"ray_internals/_tune.py": "why each private name of Tune is used, in its words"}


def spelled(module: str, tree: ast.Module) -> list[str]:
    """The status words a module spells: a string that is one, or a string that lists
    two or more (a description, a message: "only QUEUED or RUNNING stop")."""
    found = []
    for value in strings(tree):
        if value in WORDS:
            if (module, value) not in NOT_A_STATUS:
                found.append(value)
        elif len(set(WORD.findall(value))) >= 2 and module not in PROSE:
            found.append(value)
    return found


def test_no_module_spells_a_status_but_tuner_statuses():
    offenders = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        module = path.relative_to(PACKAGE).as_posix()
        if module == "statuses.py" or module.startswith(FROZEN):
            continue
        found = spelled(module, ast.parse(path.read_text()))
        if found:
            offenders[module] = found
    assert offenders == {}


def test_the_check_sees_a_word_a_list_and_a_message():
    source = '''
"""A docstring may say QUEUED -> RUNNING."""
ACTIVE = {"RUNNING", "STOPPING"}
kind = Literal["PENDING", "ERROR"]
def stop(rec):
    """Prose: only QUEUED or RUNNING stop."""
    raise Conflict(f"sweep is {rec.status}; only QUEUED or RUNNING stop")
ok = "the rest wait QUEUED in submission order"
'''
    found = spelled("x.py", ast.parse(source))
    assert sorted(found) == sorted(
        ["RUNNING", "STOPPING", "PENDING", "ERROR", "; only QUEUED or RUNNING stop"]
    )
    assert spelled("launcher/_jobs.py", ast.parse('JOB_TERMINAL = {"FAILED"}')) == []


@pytest.mark.parametrize("name", ["app.js", "index.html"])
def test_the_page_spells_no_status(name):
    """The page takes the statuses and their groups from GET /api/v1/statuses."""
    source = (STATIC / name).read_text()
    assert WORD.findall(source) == []
    if name == "app.js":
        assert "api('/statuses')" in source


def test_the_groups_agree_with_the_state_machine():
    Q = SweepStatus.QUEUED
    assert set(TRANSITIONS) == set(SweepStatus)
    # an outcome leaves only by a resume (or never); a resume starts it over, QUEUED
    assert statuses.TERMINAL == {s for s, to in TRANSITIONS.items() if to <= {Q}}
    assert statuses.RESUMABLE == {s for s in statuses.TERMINAL if Q in TRANSITIONS[s]}
    stop = {SweepStatus.STOPPED, SweepStatus.STOPPING}
    assert all(TRANSITIONS[s] & stop for s in statuses.STOPPABLE)
    assert statuses.ACTIVE == set(SweepStatus) - statuses.TERMINAL
    assert statuses.LAUNCHED < statuses.ACTIVE
    assert Q not in statuses.LAUNCHED
    assert statuses.TRIAL_ENDED | statuses.TRIAL_UNFINISHED == set(TrialStatus)
    assert not statuses.TRIAL_ENDED & statuses.TRIAL_UNFINISHED
    assert statuses.in_order(statuses.RESUMABLE) == ["PARTIAL", "STOPPED", "FAILED"]


def test_a_trial_status_is_ray_tunes_own_word():
    from ray.tune.experiment import Trial

    tune = {Trial.PENDING, Trial.RUNNING, Trial.PAUSED, Trial.TERMINATED, Trial.ERROR}
    assert {s.value for s in TrialStatus} == tune


def test_a_status_is_its_plain_word_everywhere(tmp_path):
    s = SweepStatus.SUCCEEDED
    assert s == "SUCCEEDED"
    assert str(s) == f"{s}" == "SUCCEEDED"
    assert json.dumps({s: [TrialStatus.ERROR]}) == '{"SUCCEEDED": ["ERROR"]}'
    trial = TrialView(trial_id="t", status="ERROR")
    assert trial.status is TrialStatus.ERROR
    assert trial.model_dump(mode="json")["status"] == "ERROR"
    assert json.loads(trial.model_dump_json())["status"] == "ERROR"
    summary = SweepSummary(name="n", status="STOPPED", metric="m", mode="max")
    assert json.loads(summary.model_dump_json())["status"] == "STOPPED"
    with pytest.raises(ValueError):
        TrialView(trial_id="t", status="DONE")

    store = Store(f"sqlite:///{tmp_path / 'tuner.db'}")
    try:
        rec = store.create_experiment(name="n", spec={}, warnings=[])
        assert rec.status is SweepStatus.QUEUED
        assert store.transition(rec.id, SweepStatus.RUNNING, allowed_from={"QUEUED"})
        store.upsert_trial(rec.id, "t1", status=TrialStatus.RUNNING)
        with pytest.raises(ValueError):
            store.upsert_trial(rec.id, "t2", status="DONE")
        with store.engine.connect() as db:  # the stored words: no migration needed
            row = db.execute(text("SELECT status, typeof(status) FROM experiments")).one()
            assert tuple(row) == ("RUNNING", "text")
            assert db.execute(text("SELECT status FROM trials")).scalar() == "RUNNING"
        view = ExperimentView.from_record(store.get_experiment(rec.id), store.trial_counts(rec.id))
        body = json.loads(view.model_dump_json())
        assert body["status"] == "RUNNING"
        assert body["trial_counts"] == {"RUNNING": 1}
    finally:
        store.close()


@pytest.fixture
def client(tmp_path):
    app = create_app(Settings(data_dir=tmp_path, api_token="secret-token"))
    app.state.store = Store(f"sqlite:///{tmp_path / 'tuner.db'}")
    yield TestClient(app, base_url="http://127.0.0.1")  # no lifespan: only the store needed
    app.state.store.close()


def test_the_statuses_route_serves_them_without_a_token(client):
    assert client.get("/api/v1/experiments").status_code == 401  # the API wants the token
    body = client.get("/api/v1/statuses").json()  # the vocabulary is as public as /openapi.json
    assert body == {
        "sweep": ["QUEUED", "RUNNING", "STOPPING", "SUCCEEDED", "PARTIAL", "STOPPED", "FAILED"],
        "terminal": ["SUCCEEDED", "PARTIAL", "STOPPED", "FAILED"],
        "stoppable": ["QUEUED", "RUNNING"],
        "resumable": ["PARTIAL", "STOPPED", "FAILED"],
        "trial": ["PENDING", "RUNNING", "PAUSED", "TERMINATED", "ERROR"],
    }
    assert body == StatusList.current().model_dump(mode="json")


def test_openapi_declares_the_statuses_as_enums(client):
    schema = client.get("/openapi.json").json()
    components = schema["components"]["schemas"]
    assert components["SweepStatus"]["enum"] == [s.value for s in SweepStatus]
    assert components["TrialStatus"]["enum"] == [s.value for s in TrialStatus]
    assert "SUCCEEDED: some trial finished" in components["SweepStatus"]["description"]
    sweep = {"$ref": "#/components/schemas/SweepStatus"}
    trial = {"$ref": "#/components/schemas/TrialStatus"}
    assert components["ExperimentView"]["properties"]["status"] == sweep
    assert components["TrialView"]["properties"]["status"] == trial
    assert components["StatusList"]["properties"]["trial"]["items"] == trial
    listing = schema["paths"]["/api/v1/experiments"]["get"]["parameters"]
    (status,) = [p for p in listing if p["name"] == "status"]
    assert sweep in status["schema"]["anyOf"]
    ok = schema["paths"]["/api/v1/statuses"]["get"]["responses"]["200"]
    assert ok["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/StatusList"
    }


def test_a_status_filter_outside_the_enum_is_a_422(client):
    auth = {"Authorization": "Bearer secret-token"}
    assert client.get("/api/v1/experiments?status=RUNNING", headers=auth).status_code == 200
    response = client.get("/api/v1/experiments?status=DONE", headers=auth)
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == "status"
