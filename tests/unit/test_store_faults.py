"""Faults are normal: a store that cannot be written (its small filesystem filled up under
the running service; a read-only remount is refused while the store holds its files
open) answers 503 with what it said, never a 500; nothing is half-written, and the
service is normal again once there is room."""

from __future__ import annotations

import subprocess

import pytest
from fastapi.testclient import TestClient

SPEC = {"name": "ro", "algorithm": "PPO", "env": "CartPole-v1"}


def _mount(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["mount", *args], capture_output=True, text=True, timeout=30)


def test_a_full_store_is_a_503_and_nothing_is_lost(tmp_path, service_app):
    data = tmp_path  # the app's data dir (service_app): the store's filesystem
    mounted = _mount("-t", "tmpfs", "-o", "size=16m", "tmpfs", str(data))
    if mounted.returncode != 0:  # a machine that lets no process mount a filesystem
        pytest.skip(f"cannot mount a small filesystem to fill here: {mounted.stderr}")
    app = None
    try:
        app = service_app(cluster_fit_check=False)
        client = TestClient(app, base_url="http://127.0.0.1")
        first = client.post("/api/v1/experiments", json=SPEC)
        assert first.status_code == 201, first.text
        filler = data / "filler"
        with filler.open("wb", buffering=0) as f:  # every byte the filesystem has left
            try:
                while True:
                    f.write(b"\0" * 65536)
            except OSError:
                pass
        refused = client.post("/api/v1/experiments", json={**SPEC, "name": "ro-2"})
        assert refused.status_code == 503, refused.text
        detail = refused.json()["detail"]
        assert "store is unavailable" in detail, detail
        assert "full" in detail, detail
        assert refused.headers["Retry-After"] == "10"
        stop = client.post(f"/api/v1/experiments/{first.json()['id']}/stop")
        assert stop.status_code == 503, stop.text  # the stop is not half-done either
        filler.unlink()  # room again
        again = client.post("/api/v1/experiments", json={**SPEC, "name": "ro-3"})
        assert again.status_code == 201, again.text
        listed = client.get("/api/v1/experiments").json()["items"]
        assert sorted(e["name"] for e in listed) == ["ro", "ro-3"]
        assert {e["status"] for e in listed} == {"QUEUED"}  # the refused stop left it as it was
    finally:
        if app is not None:
            app.state.store.close()
        subprocess.run(["umount", str(data)], capture_output=True, timeout=30)


def test_a_corrupt_store_is_a_json_500_naming_the_error(tmp_path, service_app):
    """A store file overwritten under the running service (not a database any more) is an
    error no request can fix: a 500, still JSON with a `detail` that names it."""
    app = service_app(cluster_fit_check=False)
    client = TestClient(app, base_url="http://127.0.0.1", raise_server_exceptions=False)
    assert client.post("/api/v1/experiments", json=SPEC).status_code == 201
    app.state.store.close()  # its pooled connections: the next request opens the file anew
    db = tmp_path / "tuner.db"
    db.write_bytes(b"not a database\n" * 4096)
    listed = client.get("/api/v1/experiments")
    assert listed.status_code == 500, listed.text
    assert listed.headers["content-type"] == "application/json"
    detail = listed.json()["detail"]
    assert "internal error on GET /api/v1/experiments: DatabaseError" in detail, detail
    assert "file is not a database" in detail, detail
