"""How a `tuner run` process ends: with the right exit code, its output complete, and no
Ray process of its own left behind (it ends without the interpreter's teardown, after
every exit hook has run)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def _processes_under(path: str) -> list[str]:
    """Command lines of the processes that name `path` (a Ray temp dir)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if path in cmdline:
            found.append(cmdline[:200])
    return found


def test_a_spec_refused_after_the_ray_start_exits_2_and_leaves_no_ray_behind(tmp_path):
    spec = {
        "name": "refused",
        "algorithm": "PPO",
        "env": "CartPole-v1",
        "config": {"train_batch_size_per_learner": 128, "no_such": 1},
    }
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    ray_tmp = tempfile.mkdtemp(prefix="tr-", dir="/tmp")  # short: Ray's socket paths
    try:
        env = {**os.environ, "RAY_TMPDIR": ray_tmp, "TUNER_DATA_DIR": str(tmp_path / "d")}
        out = subprocess.run(
            [sys.executable, "-m", "tuner.cli", "run", str(path)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert out.returncode == 2, out.stderr[-2000:]
        assert "config.no_such" in out.stdout + out.stderr
        assert "Traceback" not in out.stderr
        assert list(Path(ray_tmp).glob("ray/session_*")), "the run started no Ray of its own"
        deadline = time.monotonic() + 2  # Ray's processes die with it, given time
        while _processes_under(ray_tmp) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert _processes_under(ray_tmp) == []
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
