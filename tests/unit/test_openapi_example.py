"""The example spec of `POST /experiments` in the OpenAPI schema is a sweep the service
takes (201): the docs show it, and schemathesis draws it, so its stateful phase gets a
sweep id to follow the links with (tests/e2e/test_schema.py)."""

from __future__ import annotations

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
