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


def run_cli(args: list[str], ray_tmp: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tuner.cli", *args],
        cwd=ROOT,
        env={**os.environ, "RAY_TMPDIR": ray_tmp, **env},
        capture_output=True,
        text=True,
        timeout=300,
    )


def small_spec(tmp_path: Path, name: str) -> Path:
    """A valid PPO CartPole spec file (batch 128) in tmp_path."""
    spec = {
        "name": name,
        "algorithm": "PPO",
        "env": "CartPole-v1",
        "config": {"train_batch_size_per_learner": 128},
    }
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    return path


def test_a_spec_refused_before_the_ray_start_exits_2_and_starts_no_ray(tmp_path):
    """`tuner run` validates the spec (every problem, in one pass) before it starts Ray."""
    spec = {
        "name": "refused",
        "algorithm": "PPO",
        "env": "CartPole-v1",
        "config": {"train_batch_size_per_learner": 128, "no_such": 1},
        "resources": {"num_env_runners": 64},
    }
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    ray_tmp = tempfile.mkdtemp(prefix="tr-", dir="/tmp")  # short: Ray's socket paths
    try:
        out = run_cli(["run", str(path)], ray_tmp, TUNER_DATA_DIR=str(tmp_path / "d"))
        assert out.returncode == 2, out.stderr[-2000:]
        said = " ".join((out.stdout + out.stderr).split())
        # both problems in one answer: RLlib's key check and the fit on this machine
        assert "config.no_such" in said
        assert "resources.num_env_runners" in said
        assert "Traceback" not in out.stderr
        assert not list(Path(ray_tmp).glob("ray/session_*")), "a Ray was started"
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)


def test_a_run_refused_after_the_ray_start_exits_2_and_leaves_no_ray_behind(tmp_path):
    """A resume whose Tune storage cannot be listed (a file in its way) fails once Ray
    is up: exit 2, the path named, and Ray's processes gone with the run."""
    path = small_spec(tmp_path, "refused")
    blocked = tmp_path / "not-a-dir"
    blocked.write_text("a file where the Tune storage should be")
    ray_tmp = tempfile.mkdtemp(prefix="tr-", dir="/tmp")
    try:
        out = run_cli(
            ["run", str(path), "--resume"],
            ray_tmp,
            TUNER_DATA_DIR=str(tmp_path / "d"),
            TUNER_STORAGE_PATH=str(blocked),
        )
        assert out.returncode == 2, out.stderr[-2000:]
        assert str(blocked) in out.stdout + out.stderr
        assert "Traceback" not in out.stderr
        assert list(Path(ray_tmp).glob("ray/session_*")), "the run started no Ray of its own"
        deadline = time.monotonic() + 2  # Ray's processes die with it, given time
        while _processes_under(ray_tmp) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert _processes_under(ray_tmp) == []
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)


def test_a_local_ray_that_cannot_start_exits_1_naming_the_cause(tmp_path):
    """Ray's temp dir under a file (a real start failure, at once): `tuner run` says the
    local Ray did not start and why, in a line, and exits 1 without a traceback."""
    path = small_spec(tmp_path, "no-ray")
    blocked = tmp_path / "a-file"
    blocked.write_text("a file where Ray's temp dir should be")
    out = run_cli(["run", str(path)], str(blocked / "ray"), TUNER_DATA_DIR=str(tmp_path / "d"))
    assert out.returncode == 1, out.stderr[-2000:]
    said = " ".join(out.stderr.split())
    assert "the local Ray did not start: NotADirectoryError" in said
    assert "Traceback" not in out.stderr


def test_evaluate_of_a_model_that_is_not_there_says_so_in_one_line(tmp_path):
    """`tuner evaluate models:/nope-best/1 --data-dir D`: one line naming the model and
    what the registry of D has, exit 2, no traceback."""
    from mlflow.tracking import MlflowClient

    data = tmp_path / "data"
    data.mkdir()
    client = MlflowClient(tracking_uri=f"sqlite:///{data / 'mlflow.db'}")
    client.create_registered_model("cartpole-best")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "tuner.cli",
            "evaluate",
            "models:/nope-best/1",
            "--data-dir",
            str(data),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr
    lines = [ln for ln in out.stderr.splitlines() if "nope-best" in ln]
    assert len(lines) == 1, out.stderr
    assert "no model version nope-best/1" in lines[0]
    assert "registered models: cartpole-best" in lines[0]


def test_a_run_with_a_trial_failed_for_good_exits_4(tmp_path):
    """`tuner run` of a sweep that ends PARTIAL (a trial whose loss turns NaN, retried
    max_failures times, then ERROR) exits 4 (README), never 0."""
    import yaml

    spec = {
        "name": "partial",
        "algorithm": "PPO",
        "env": "tests.envs:LineEnv",
        "config": {"train_batch_size_per_learner": 128, "minibatch_size": 64, "num_epochs": 1},
        "model": {"fcnet_hiddens": [16]},
        "search": {"method": "grid", "space": {"env_config.nan_reward": {"grid": [False, True]}}},
        "stop": {"training_iteration": 1},
        "max_failures": 1,
        "checkpoint": {"at_end": False},
        "resources": {"num_env_runners": 0},
    }
    path = tmp_path / "partial.yaml"
    path.write_text(yaml.safe_dump(spec))
    ray_tmp = tempfile.mkdtemp(prefix="r", dir="/tmp")
    try:
        out = run_cli(
            [
                "run",
                str(path),
                "--output",
                "json",
                "--data-dir",
                str(tmp_path / "data"),
                "--allow-module",
                "tests",
            ],
            ray_tmp,
        )
        assert out.returncode == 4, out.stderr[-3000:]
        summary = json.loads(out.stdout)
        assert summary["status"] == "PARTIAL"
        assert sorted(t["status"] for t in summary["trials"]) == ["ERROR", "TERMINATED"]
        assert max(t["retries"] for t in summary["trials"]) == 1
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
