"""The real server as a subprocess (uvicorn, embedded Ray head), driven over HTTP."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """`tuner serve` in its own process group, on a data dir of its own."""

    def __init__(self, data_dir: Path, *args: str, **env: str) -> None:
        self.data_dir = data_dir
        self.args = list(args)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {
            **os.environ,
            "TUNER_DATA_DIR": str(data_dir),
            "TUNER_EMBEDDED_NUM_CPUS": "2",
            "TUNER_POLL_INTERVAL_S": "0.5",
            **env,
        }
        self.proc: subprocess.Popen | None = None
        self.log = data_dir / f"server-{self.port}.log"

    def start(self, timeout: float = 120) -> Server:
        try:
            return self._start(timeout)
        except AssertionError as exited:
            # the port picked free was taken before uvicorn bound it: once more, elsewhere
            if "address already in use" not in str(exited):
                raise
            self.port = free_port()
            self.url = f"http://127.0.0.1:{self.port}"
            self.log = self.data_dir / f"server-{self.port}.log"
            return self._start(timeout)

    def _start(self, timeout: float) -> Server:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tuner.cli", "serve", "--port", str(self.port), *self.args],
            cwd=ROOT,
            env=self.env,
            stdout=self.log.open("ab"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.time() + timeout
        while time.time() < deadline:
            assert self.proc.poll() is None, self.log.read_text()[-3000:]
            try:
                if httpx.get(f"{self.url}/api/v1/healthz", timeout=2).status_code == 200:
                    # this server's uvicorn, not another test's process that took the
                    # port while this one started (uvicorn binds after its startup)
                    if f"running on {self.url}" in self.log.read_text(errors="replace"):
                        return self
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        raise TimeoutError(self.log.read_text()[-3000:])

    def kill(self) -> None:
        """SIGKILL the server's own process group (not the Ray head it started)."""
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.kill()

    def stop_head(self) -> None:
        """Stops the embedded Ray head this test's servers started (by its recorded pid;
        a clean server stop already did) and removes its Ray temp dir."""
        from tuner.launcher import Launcher
        from tuner.settings import Settings

        head = self.data_dir / "ray-head.json"
        if head.exists():
            self._stop_group(json.loads(head.read_text())["pid"])
        shutil.rmtree(Launcher(Settings(data_dir=self.data_dir)).temp_dir, ignore_errors=True)

    @staticmethod
    def _stop_group(pid: int) -> None:
        try:
            os.killpg(pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        for _ in range(60):
            try:
                os.killpg(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.5)
        os.killpg(pid, signal.SIGKILL)

    def client(self, **kw) -> httpx.Client:
        return httpx.Client(base_url=f"{self.url}/api/v1", timeout=120, **kw)


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    srv = Server(tmp_path_factory.mktemp("e2e") / "data").start()
    yield srv
    srv.stop()
    srv.stop_head()


def wait_for(client, experiment_id, predicate, timeout=240, interval=0.5):
    """Polls GET /experiments/{id} until predicate(view) holds; returns the view."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        view = client.get(f"/experiments/{experiment_id}").json()
        if predicate(view):
            return view
        time.sleep(interval)
    raise TimeoutError(f"{experiment_id}: {view['status']} {view.get('error')}")


def tiny(name="e2e", iterations=2, **patch):
    spec = {
        "name": name,
        "algorithm": "PPO",
        "env": "CartPole-v1",
        "config": {"train_batch_size_per_learner": 128, "minibatch_size": 64, "num_epochs": 1},
        "model": {"fcnet_hiddens": [16]},
        "search": {"method": "grid", "space": {"lr": {"grid": [1e-4, 1e-3]}}},
        "stop": {"training_iteration": iterations},
        "max_concurrent_trials": 2,
    }
    spec.update(patch)
    return spec
