"""The supervisor against a real Ray head whose job server stops answering.

The dashboard process is frozen (SIGSTOP) while a sweep is submitted: the request
reaches its socket but no answer comes in time. When it thaws it takes the queued
submission after all, so the supervisor must follow that job, not start a second one.
"""

from __future__ import annotations

import os
import shutil
import signal
import time
from pathlib import Path

import pytest

from tests.conftest import TINY_PPO
from tuner import service
from tuner.launcher import Launcher
from tuner.settings import Settings
from tuner.spec import parse_spec
from tuner.store import Store

pytestmark = pytest.mark.integration


def _dashboard_pid(head_pid: int) -> int:
    """The head's dashboard process (same process group as the head we started)."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if os.getpgid(int(proc.name)) != head_pid:
                continue
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (ProcessLookupError, FileNotFoundError, PermissionError):
            continue
        if "dashboard/dashboard.py" in cmdline:
            return int(proc.name)
    raise LookupError("no dashboard process under the head")


@pytest.fixture
def head(tmp_path):
    settings = Settings(data_dir=tmp_path / "data", ray_request_timeout_s=2, poll_interval_s=0.5)
    settings.data_path.mkdir(parents=True)
    launcher = Launcher(settings)
    launcher.start(num_cpus=1)
    yield settings, launcher
    launcher.stop_head()
    shutil.rmtree(launcher.temp_dir, ignore_errors=True)


def test_a_submit_that_times_out_is_followed_not_duplicated(head):
    settings, launcher = head
    store = Store(settings.store_url)
    spec = parse_spec(
        {
            "name": "frozen",
            "algorithm": "PPO",
            "env": "CartPole-v1",
            "config": TINY_PPO,
            "stop": {"training_iteration": 1},
        }
    ).model_dump(mode="json")
    rec = service.submit(store, spec, [])
    supervisor = service.Supervisor(store, launcher, settings)
    launcher.jobs.list()  # the client exists before the freeze
    dashboard = _dashboard_pid(launcher.head.process.pid)
    os.kill(dashboard, signal.SIGSTOP)
    try:
        started = time.monotonic()
        supervisor.tick()  # the submit's answer times out after ray_request_timeout_s
        assert time.monotonic() - started < 20
        after = store.get_experiment(rec.id)
        assert after.status == "RUNNING"
        assert after.job_id
        assert after.attempts == 1
        supervisor.tick()  # the status call times out too: nothing changes
        assert store.get_experiment(rec.id).job_id == after.job_id
    finally:
        os.kill(dashboard, signal.SIGCONT)
    # past the time the supervisor gives an unknown job id to land (2 x 2 s + 5 s)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        supervisor.tick()
        time.sleep(0.5)
    jobs = [j["submission_id"] for j in launcher.jobs.list()]
    jobs = [j for j in jobs if j.startswith("tuner-")]
    assert len(jobs) == 1, jobs  # one driver, never two
    if jobs[0] == after.job_id:  # the thawed server took the first submission
        assert store.get_experiment(rec.id).attempts == 1
    launcher.stop(jobs[0])
    store.close()
