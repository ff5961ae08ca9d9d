"""Sweeps side by side: `GET /api/v1/compare?ids=A,B` and `tuner compare A B`, over the
real store and the real app."""

from __future__ import annotations

import json

from fastapi.testclient import TestClient
from typer.testing import CliRunner

from tests.stored import METRIC, stored_sweep


def sweep(store, name: str, config: dict, score: float, confirmed: float | None = None) -> str:
    spec = {"name": name, "algorithm": "PPO", "env": "CartPole-v1", "metric": METRIC}
    return stored_sweep(store, spec, config, score, confirmed)


def test_two_sweeps_side_by_side_with_the_differing_keys_named(service_app, monkeypatch):
    app = service_app()
    client = TestClient(app, base_url="http://127.0.0.1")
    store = app.state.store
    a = sweep(store, "a", {"lr": 1e-3, "gamma": 0.99}, 20.0, confirmed=19.0)
    b = sweep(store, "b", {"lr": 3e-4, "gamma": 0.99, "num_epochs": 5}, 30.0)
    body = client.get(f"/api/v1/compare?ids={a},{b}").json()
    assert [s["id"] for s in body["sweeps"]] == [a, b]
    assert body["keys"] == ["gamma", "lr", "num_epochs"]
    assert body["differing_keys"] == ["lr", "num_epochs"]
    first, second = body["sweeps"]
    assert first["best"]["metric_value"] == 20.0
    assert first["confirmed"]["mean"] == 19.0
    assert second["confirmed"] is None
    assert [p["env_steps"] for p in first["curve"]] == [100, 200, 300]
    assert first["curve"][-1]["value"] == 20.0
    # bad input: a 422 naming `ids`, a 404 naming the sweep
    one = client.get(f"/api/v1/compare?ids={a}")
    assert one.status_code == 422
    assert one.json()["detail"][0]["loc"] == "ids"
    twice = client.get(f"/api/v1/compare?ids={a},{a}")
    assert twice.status_code == 422
    missing = client.get(f"/api/v1/compare?ids={a},nope")
    assert missing.status_code == 404
    assert "nope" in missing.text
    assert "/api/v1/compare" in client.get("/openapi.json").json()["paths"]

    # the CLI over the same app
    from tuner.cli import _remote
    from tuner.cli import app as cli

    monkeypatch.setattr(
        _remote, "_client", lambda url: TestClient(app, base_url="http://127.0.0.1/api/v1")
    )
    out = CliRunner().invoke(cli, ["compare", a, b, "--output", "json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["differing_keys"] == ["lr", "num_epochs"]
    table = CliRunner().invoke(cli, ["compare", a, b])
    assert table.exit_code == 0, table.output
    lines = table.stdout.splitlines()  # piped: tab-separated, whole values
    assert lines[0].split("\t")[1:] == [f"a ({a})", f"b ({b})"]
    assert "lr *\t0.001\t0.0003" in lines
    assert "gamma\t0.99\t0.99" in lines
    assert any(line.startswith("confirmed mean [95 % CI]\t19 [18, 20]\t-") for line in lines)
