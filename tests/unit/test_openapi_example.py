"""The example spec of `POST /experiments` in the OpenAPI schema is a sweep the service
takes (201): the docs show it, and schemathesis draws it, so its stateful phase gets a
sweep id to follow the links with (tests/e2e/test_schema.py)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient


def test_the_post_example_is_a_spec_the_service_takes(service_app):
    client = TestClient(service_app(cluster_fit_check=False), base_url="http://127.0.0.1")
    schema = client.get("/openapi.json").json()
    content = schema["paths"]["/api/v1/experiments"]["post"]["requestBody"]["content"]
    examples = content["application/json"]["examples"]
    assert content["application/yaml"]["examples"] == examples
    for example in examples.values():
        created = client.post("/api/v1/experiments", json=example["value"])
        assert created.status_code == 201, created.text
        assert created.json()["warnings"] == []


def test_responses_have_no_tuple_arrays_and_still_describe_a_series(service_app):
    """`prefixItems` (pydantic's tuples) is valid OpenAPI 3.1, but schemathesis turns it into
    a draft-4 `items` list when it checks a response, and then refuses the document (the
    stateful phase failed on `MetricSeries`): tuples in responses are declared as arrays
    of numbers. (Request bodies keep them: schemathesis generates from them as they are.)"""
    import jsonschema

    client = TestClient(service_app(cluster_fit_check=False), base_url="http://127.0.0.1")
    schema = client.get("/openapi.json").json()
    components = schema["components"]["schemas"]
    seen: set[str] = set()

    def tuple_arrays(node) -> list[str]:
        found = []
        if isinstance(node, dict):
            ref = node.get("$ref", "")
            if ref.startswith("#/components/schemas/") and ref not in seen:
                seen.add(ref)
                found += tuple_arrays(components[ref.rsplit("/", 1)[1]])
            for key, value in node.items():
                found += [key] if key == "prefixItems" else tuple_arrays(value)
        elif isinstance(node, list):
            for value in node:
                found += tuple_arrays(value)
        return found

    responses = [op["responses"] for path in schema["paths"].values() for op in path.values()]
    assert "#/components/schemas/MetricSeries" in str(responses)
    assert tuple_arrays(responses) == []
    series = components["MetricSeries"]
    jsonschema.Draft202012Validator(series).validate({"key": "m", "series": {"t": [[128, 1.5]]}})
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(series).validate({"key": "m", "series": {"t": [[128]]}})


def test_the_schema_says_an_rllib_algorithm_needs_an_env(service_app):
    """A body the schema allows is one the service takes as far as the schema can tell:
    `env: null` with PPO is refused by the schema too, a training loop of your own (an
    import path) may omit it. Both answers agree with the server's."""
    import jsonschema

    client = TestClient(service_app(cluster_fit_check=False), base_url="http://127.0.0.1")
    schema = client.get("/openapi.json").json()
    components = schema["components"]["schemas"]
    spec_schema = {**components["ExperimentSpec"], "components": schema["components"]}
    resolver_schema = json_refs_inlined(spec_schema)
    validator = jsonschema.Draft202012Validator(resolver_schema)
    rllib = {"name": "n", "algorithm": "PPO", "env": None}
    assert not validator.is_valid(rllib)
    assert not validator.is_valid({"name": "n", "algorithm": "PPO"})
    assert validator.is_valid({**rllib, "env": "CartPole-v1"})
    own = {"name": "n", "algorithm": "mypkg.train:loop", "metric": "loss"}
    assert validator.is_valid(own)
    refused = client.post("/api/v1/experiments?dry_run=true", json=rllib)
    assert refused.status_code == 422
    assert "env" in refused.text


def test_a_sweeps_trials_link_to_a_trials_metrics(service_app):
    client = TestClient(service_app(cluster_fit_check=False), base_url="http://127.0.0.1")
    schema = client.get("/openapi.json").json()
    listed = schema["paths"]["/api/v1/experiments/{experiment_id}/trials"]["get"]
    link = listed["responses"]["200"]["links"]["TrialMetrics"]
    operation_ids = {op["operationId"] for path in schema["paths"].values() for op in path.values()}
    assert link["operationId"] in operation_ids
    assert link["parameters"] == {
        "experiment_id": "$request.path.experiment_id",
        "trial_id": "$response.body#/items/0/trial_id",
    }


def json_refs_inlined(node, root=None):  # noqa: ANN001, ANN201
    """The schema with its #/components/schemas refs inlined (they are not recursive)."""
    root = root or node
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/components/schemas/"):
            target = root["components"]["schemas"][ref.rsplit("/", 1)[-1]]
            return json_refs_inlined(target, root)
        return {k: json_refs_inlined(v, root) for k, v in node.items() if k != "components"}
    if isinstance(node, list):
        return [json_refs_inlined(v, root) for v in node]
    return node
