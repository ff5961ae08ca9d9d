"""`tuner serve` and `make run` on ports: the ports come from TUNER_PORT /
TUNER_MLFLOW_PORT (or the options), and a busy one is named before anything starts."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A port another process holds: bound and listening on loopback."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen(1)
        yield held.getsockname()[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`tuner serve` as a subprocess. Its cluster is a dead address, so that a serve that
    went past the port check would start no Ray head; the timeout ends it then."""
    # no tracking server: the MLflow UI is ours to start, its port ours to check
    unset = ("TUNER_PORT", "TUNER_MLFLOW_PORT", "TUNER_MLFLOW_TRACKING_URI")
    clean = {k: v for k, v in os.environ.items() if k not in unset}
    clean.update(
        TUNER_DATA_DIR=str(tmp_path),
        TUNER_RAY_ADDRESS=f"http://127.0.0.1:{_free_port()}",
        **env,
    )
    serve = subprocess.Popen(
        [sys.executable, "-m", "tuner.cli", "serve", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=clean,
    )
    try:
        out, errors = serve.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        # SIGTERM, not a kill: the server's shutdown stops the MLflow UI it started
        serve.terminate()
        out, errors = serve.communicate(timeout=60)
        pytest.fail(f"tuner serve went past its port check:\n{errors[-3000:]}")
    return subprocess.CompletedProcess(serve.args, serve.returncode, out, errors)


def test_a_busy_api_port_is_named_with_how_to_pick_another(tmp_path, busy_port):
    done = _serve(tmp_path, "--port", str(busy_port))
    text = " ".join(done.stderr.split())
    assert done.returncode == 2, done.stderr
    assert f"port {busy_port} on 127.0.0.1 (the API) is in use by another process" in text
    assert "--port or TUNER_PORT" in text
    assert "Errno" not in text
    assert not (tmp_path / "ray-head.log").exists()


def test_a_busy_mlflow_ui_port_from_tuner_mlflow_port_is_named(tmp_path, busy_port):
    done = _serve(
        tmp_path, "--port", str(_free_port()), "--mlflow-ui", TUNER_MLFLOW_PORT=str(busy_port)
    )
    text = " ".join(done.stderr.split())
    assert done.returncode == 2, done.stderr
    assert f"port {busy_port} on 127.0.0.1 (the MLflow UI) is in use by another process" in text
    assert "--mlflow-port or TUNER_MLFLOW_PORT" in text
    assert "(the API)" not in text  # the API's port is free: only the busy one is named


def test_the_api_and_the_mlflow_ui_cannot_share_a_port(tmp_path):
    port = str(_free_port())
    done = _serve(tmp_path, "--port", port, "--mlflow-ui", "--mlflow-port", port)
    assert done.returncode == 2, done.stderr
    assert f"cannot share port {port}" in " ".join(done.stderr.split())


def _make_run(*args: str, **env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if k not in ("TUNER_PORT", "TUNER_MLFLOW_PORT")}
    done = subprocess.run(
        ["make", "-n", "-C", str(ROOT), "run", *args],
        capture_output=True,
        text=True,
        env={**clean, **env},
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    (serve,) = [line for line in done.stdout.splitlines() if "tuner serve" in line]
    return serve


def test_make_run_passes_the_ports_through():
    assert "--port 8000 --mlflow-ui --mlflow-port 5000" in _make_run()
    assert "--port 8123 " in _make_run("TUNER_PORT=8123")
    from_env = _make_run(TUNER_PORT="8124", TUNER_MLFLOW_PORT="5124")
    assert "--port 8124 " in from_env
    assert from_env.endswith("--mlflow-port 5124")
