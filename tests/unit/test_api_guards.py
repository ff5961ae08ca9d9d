"""API guards that need no cluster: bearer token, body size limit, bind refusal."""

from __future__ import annotations

import subprocess
import sys

import pytest
from fastapi.testclient import TestClient

from tuner.api import create_app
from tuner.settings import Settings
from tuner.views import Problems


@pytest.fixture
def client(tmp_path):
    app = create_app(Settings(data_dir=tmp_path, api_token="s3cret", max_body_bytes=1000))
    # no lifespan: the guards answer before any store or Ray work
    return TestClient(app, base_url="http://127.0.0.1")


@pytest.mark.parametrize(
    "path", ["/api/v1/experiments", "/api/v1/algorithms", "/api/v1/experiments/x/trials"]
)
def test_token_required(client, path):
    assert client.get(path).status_code == 401
    assert client.get(path, headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert client.get(path, headers={"Authorization": "s3cret"}).status_code == 401
    r = client.post("/api/v1/experiments", json={})
    assert r.status_code == 401
    assert r.headers["www-authenticate"] == "Bearer"


def test_token_accepted(client):
    r = client.get("/api/v1/algorithms", headers={"Authorization": "Bearer s3cret"})
    assert r.status_code == 200
    assert {a["name"] for a in r.json()} >= {"PPO", "Rainbow_DQN"}


def test_body_limit(client):
    """A 413 has the shape of every bad-input answer, the one the schema declares."""
    r = client.post(
        "/api/v1/experiments", content=b"x" * 5000, headers={"Authorization": "Bearer s3cret"}
    )
    assert r.status_code == 413
    (problem,) = Problems.model_validate(r.json()).detail
    assert problem.loc == "(body)"
    assert "1000 bytes" in problem.msg
    assert "TUNER_MAX_BODY_BYTES" in problem.msg
    assert set(r.json()["detail"][0]) == {"loc", "msg", "value"}
    schema = client.get("/openapi.json").json()
    declared = schema["paths"]["/api/v1/experiments"]["post"]["responses"]["413"]
    ref = declared["content"]["application/json"]["schema"]["$ref"]
    assert ref == "#/components/schemas/Problems"
    problems = schema["components"]["schemas"]["Problems"]
    assert problems["required"] == ["detail"]
    assert problems["properties"]["detail"]["type"] == "array"


def test_a_streamed_body_over_the_limit_gets_the_same_413(service_app):
    """No Content-Length: the limit is counted as the body arrives."""
    app = service_app(max_body_bytes=1000)
    client = TestClient(app, base_url="http://127.0.0.1")
    streamed = client.post("/api/v1/experiments", content=iter([b"x" * 600, b"x" * 600]))
    assert streamed.status_code == 413
    (problem,) = Problems.model_validate(streamed.json()).detail
    assert problem.loc == "(body)"
    assert "1000 bytes" in problem.msg
    assert client.get("/api/v1/experiments").json()["total"] == 0


def test_page_and_offline_assets(client):
    page = client.get("/")
    assert page.status_code == 200
    assert "static/app.js" in page.text
    assert "http://" not in page.text
    assert "https://" not in page.text  # nothing from a CDN
    js = client.get("/static/vendor/plotly.min.js")
    assert js.status_code == 200
    assert len(js.content) > 1_000_000


def test_serve_refuses_public_bind_without_token(tmp_path):
    env = {"TUNER_DATA_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"}
    r = subprocess.run(
        [sys.executable, "-m", "tuner.cli", "serve", "--host", "0.0.0.0"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2
    assert "TUNER_API_TOKEN" in r.stderr


def test_cross_site_requests_refused(tmp_path):
    client = TestClient(create_app(Settings(data_dir=tmp_path)), base_url="http://127.0.0.1")
    r = client.post("/api/v1/experiments/x/stop", headers={"Origin": "http://evil.example"})
    assert r.status_code == 403
    assert "evil.example" in r.json()["detail"]


def test_no_cdn_backed_docs_pages(client):
    assert client.get("/docs").status_code == 404
    assert client.get("/redoc").status_code == 404
    assert "ExperimentSpec" in client.get("/openapi.json").json()["components"]["schemas"]


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("OPTIONS", "/api/v1/experiments", {"GET", "HEAD", "POST"}),
        ("PUT", "/api/v1/experiments", {"GET", "HEAD", "POST"}),
        ("OPTIONS", "/api/v1/experiments/abc", {"DELETE", "GET", "HEAD"}),
        ("PATCH", "/api/v1/experiments/abc", {"DELETE", "GET", "HEAD"}),
        ("GET", "/api/v1/experiments/abc/stop", {"POST"}),
        ("POST", "/api/v1/healthz", {"GET", "HEAD"}),
        ("POST", "/", {"GET", "HEAD"}),
    ],
)
def test_a_405_names_every_method_of_the_path(client, method, path, allowed):
    r = client.request(method, path, headers={"Authorization": "Bearer s3cret"})
    assert r.status_code == 405
    assert set(r.headers["allow"].split(", ")) == allowed
