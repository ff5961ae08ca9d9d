"""`tuner run` as a child process for the kill / Ctrl-C / resume tests."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

# Two PPO trials at once, ~1 s an iteration, a checkpoint every iteration.
RESUMABLE = {
    "name": "resumable",
    "algorithm": "PPO",
    "env": "CartPole-v1",
    "config": {
        "train_batch_size_per_learner": 128,
        "minibatch_size": 64,
        "num_epochs": 1,
        "min_time_s_per_iteration": 1,
    },
    "model": {"fcnet_hiddens": [16]},
    "search": {"method": "grid", "num_samples": 1, "space": {"lr": {"grid": [1e-4, 1e-3]}}},
    "stop": {"training_iteration": 6},
    "checkpoint": {"frequency": 1, "at_end": True, "num_to_keep": 2},
    "max_concurrent_trials": 2,
}


def tuner_run(spec_path: Path, data: Path, *extra: str, **env: str) -> subprocess.Popen:
    """`tuner run SPEC --output json` in a process group of its own (stdout piped, stderr
    appended to DATA/stderr.log: what a failing test shows)."""
    data.mkdir(parents=True, exist_ok=True)
    with (data / "stderr.log").open("a") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "tuner.cli", "run", str(spec_path), "--output", "json", *extra],
            stdout=subprocess.PIPE,
            stderr=log,
            env={**os.environ, "TUNER_DATA_DIR": str(data), **env},
            start_new_session=True,
            text=True,
        )


def wait_while_running(
    proc: subprocess.Popen, ready: Callable[[], bool], what: str, timeout: float = 240
) -> None:
    """Polls `ready()` until true; fails if `proc` ends first or `timeout` passes."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if ready():
            return
        assert proc.poll() is None, f"the sweep ended before {what}"
        time.sleep(0.5)
    pytest.fail(f"not ready for {what} within {timeout:g} s")


def trained_iterations(data: Path, stage: str | None = None) -> list[float]:
    """The last training_iteration MLflow holds for each trial (child run) of the sweep
    in `data`, optionally only those tagged `tuner.stage: stage`. MLflow gets each result
    as it comes; Tune syncs result.json into ray_results only every ~10 s (and at the end),
    too late to interrupt a run at a given iteration. Read-only SQL: an MLflow client here
    would race the driver creating the tables."""
    db = data / "mlflow.db"
    if not db.exists():
        return []
    query = (
        "SELECT MAX(m.value) FROM metrics m JOIN tags p ON p.run_uuid = m.run_uuid "
        "AND p.key = 'mlflow.parentRunId' WHERE m.key = 'training_iteration'"
    )
    args: tuple[str, ...] = ()
    if stage is not None:
        query += (
            " AND m.run_uuid IN (SELECT run_uuid FROM tags WHERE key = 'tuner.stage' AND value = ?)"
        )
        args = (stage,)
    try:
        with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as con:
            return [v for (v,) in con.execute(query + " GROUP BY m.run_uuid", args)]
    except sqlite3.OperationalError:  # tables not created yet, or locked for a moment
        return []
