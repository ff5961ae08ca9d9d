"""What /openapi.json promises, checked on the app without a server: the real constraints
of ids and of GET /compare's `ids`, every status a route's guards answer, and the spec's
rules of single fields (tests/e2e/test_schema.py runs schemathesis against a real server
on the same document)."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient

from tests.stored import stored_sweep
from tuner import compare
from tuner.api import create_app
from tuner.settings import Settings
from tuner.spec import IMPORT_PATH_RE
from tuner.store import Store

SWEEP_OPS = [
    ("get", "/api/v1/experiments/{experiment_id}"),
    ("delete", "/api/v1/experiments/{experiment_id}"),
    ("get", "/api/v1/experiments/{experiment_id}/trials"),
    ("get", "/api/v1/experiments/{experiment_id}/trials/{trial_id}/metrics"),
    ("get", "/api/v1/experiments/{experiment_id}/metrics"),
    ("post", "/api/v1/experiments/{experiment_id}/stop"),
    ("post", "/api/v1/experiments/{experiment_id}/resume"),
]


@pytest.fixture(scope="module")
def schema(tmp_path_factory):
    app = create_app(Settings(data_dir=tmp_path_factory.mktemp("openapi")))
    return TestClient(app, base_url="http://127.0.0.1").get("/openapi.json").json()


def parameter(schema: dict, method: str, path: str, name: str) -> dict:
    params = schema["paths"][path][method]["parameters"]
    (found,) = [p for p in params if p["name"] == name]
    return found


def test_sweep_ids_are_declared_as_the_store_issues_them(schema, tmp_path):
    settings = Settings(data_dir=tmp_path)
    app = create_app(settings)
    app.state.store = store = Store(settings.store_url)
    try:
        spec = {"name": "a", "algorithm": "PPO", "env": "CartPole-v1"}
        issued = stored_sweep(store, spec, {}, 1.0)
        for method, path in SWEEP_OPS:
            declared = parameter(schema, method, path, "experiment_id")["schema"]
            assert re.fullmatch(declared["pattern"].strip("^$"), issued), (method, path)
        # an id of another form names no sweep: a 404, as an unknown one (not a 422)
        client = TestClient(app, base_url="http://127.0.0.1")
        assert client.get(f"/api/v1/experiments/{issued}/trials").status_code == 200
        assert client.get("/api/v1/experiments/nope/trials").status_code == 404
    finally:
        store.close()


def test_compare_ids_are_a_comma_separated_list_of_distinct_ids(schema):
    ids = parameter(schema, "get", "/api/v1/compare", "ids")
    assert ids["in"] == "query"
    assert ids["required"] is True
    assert (ids["style"], ids["explode"]) == ("form", False)  # a,b,c as one value
    declared = ids["schema"]
    assert declared["type"] == "array"
    assert declared["uniqueItems"] is True
    assert (declared["minItems"], declared["maxItems"]) == (2, compare.MOST)
    sweep_id = parameter(schema, "get", "/api/v1/experiments/{experiment_id}", "experiment_id")
    assert declared["items"]["pattern"] == sweep_id["schema"]["pattern"]
    # FastAPI's own description of the one string it parses is not there beside it
    assert len(schema["paths"]["/api/v1/compare"]["get"]["parameters"]) == 1


def test_every_answer_of_the_guards_is_declared(schema):
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            answers = set(operation["responses"])
            public = path in ("/api/v1/healthz", "/api/v1/statuses")
            assert ("401" in answers) != public, (method, path)
            assert ("403" in answers) == (method in ("post", "delete")), (method, path)
    for method, path in [("post", "/api/v1/experiments"), *SWEEP_OPS]:
        declared = schema["paths"][path][method]["responses"]["503"]
        assert "Retry-After" in declared["headers"]
    assert "503" not in schema["paths"]["/api/v1/algorithms"]["get"]["responses"]


def test_the_spec_rules_of_single_fields_are_in_the_schema(schema):
    components = schema["components"]["schemas"]
    spec = components["ExperimentSpec"]["properties"]
    assert spec["callbacks"]["items"]["pattern"] == IMPORT_PATH_RE.pattern
    assert {b.get("pattern") for b in spec["module"]["anyOf"]} == {IMPORT_PATH_RE.pattern, None}
    metric_keys = components["StopSpec"]["properties"]["metrics"]["propertyNames"]
    assert metric_keys["pattern"] == spec["metric"]["pattern"]
    assert components["MultiAgentSpec"]["properties"]["policies"]["uniqueItems"] is True
    domain = components["Domain"]
    assert (domain["minProperties"], domain["maxProperties"]) == (1, 1)
    assert all(field["type"] == "array" for field in domain["properties"].values())
