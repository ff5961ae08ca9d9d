"""Kill a running `tuner run` and resume it: same parent run, each trial once."""

from __future__ import annotations

import contextlib
import json
import os
import signal
from pathlib import Path

import pytest
import yaml
from mlflow.tracking import MlflowClient

from tests.integration._cli import (
    RESUMABLE,
    trained_iterations,
    tuner_run,
    wait_while_running,
)

pytestmark = pytest.mark.integration


def test_kill_and_resume(tmp_path):
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(yaml.safe_dump({**RESUMABLE, "stop": {"training_iteration": 10}}))
    data = tmp_path / "data"
    first = tuner_run(spec_path, data, TUNE_GLOBAL_CHECKPOINT_S="1")

    def checkpointed():
        # each trial has a checkpoint that Tune's newest state was saved after (a state
        # saved before names none and the resume would start over). Not one checkpoint by
        # name: num_to_keep deletes old ones while the test polls, and the state names
        # each trial's newest, which outlives the next one.
        root = data / "ray_results"
        trials = list(root.glob("resumable_*/TunerPPO_*"))
        states = list(root.glob("resumable_*/experiment_state-*.json"))
        if len(trials) != 2 or not states:
            return False
        try:
            saved = max(p.stat().st_mtime for p in states)
            return all(
                any(c.stat().st_mtime + 0.5 < saved for c in t.glob("checkpoint_0*"))
                for t in trials
            )
        except FileNotFoundError:  # deleted between the glob and the stat
            return False

    try:
        wait_while_running(first, checkpointed, "it could be killed")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(first.pid, signal.SIGKILL)  # the process group this test started
        first.wait()

    second = tuner_run(spec_path, data, "--resume")
    out, _ = second.communicate(timeout=300)
    assert second.returncode == 0, out
    summary = json.loads(out)
    assert len(summary["trials"]) == 2
    assert all(t["status"] == "TERMINATED" and t["iterations"] == 10 for t in summary["trials"])
    (run_dir,) = (data / "ray_results").glob("resumable_*")
    for trial_dir in run_dir.glob("TunerPPO_*"):
        last = json.loads((trial_dir / "result.json").read_text().strip().splitlines()[-1])
        assert last["training_iteration"] == 10
        assert last["iterations_since_restore"] < 10  # continued from a checkpoint

    client = MlflowClient(tracking_uri=f"sqlite:///{data / 'mlflow.db'}")
    runs = client.search_runs([summary["mlflow"]["experiment_id"]])
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert len(parents) == 1
    assert parents[0].info.run_id == summary["mlflow"]["parent_run_id"]
    assert len(children) == 2
    assert {c.data.tags["tuner.trial_id"] for c in children} == {
        t["trial_id"] for t in summary["trials"]
    }
    for child in children:
        iters = [
            m.value for m in client.get_metric_history(child.info.run_id, "training_iteration")
        ]
        assert sorted(iters) == sorted(set(iters))
        assert max(iters) == 10  # no duplicates
        assert child.info.status == "FINISHED"
    assert Path(summary["path"]) == run_dir


def test_ctrl_c_checkpoints_then_stops_and_resume_continues(tmp_path):
    """The first Ctrl-C has each running trial save a checkpoint (even with
    `checkpoint.frequency: 0`), then stops: the sweep is STOPPED (exit code non-zero),
    its trials PAUSED, not the TERMINATED Tune reports; `--resume` continues each trial
    from that checkpoint."""
    spec = {
        **RESUMABLE,
        "name": "ctrlc",
        "stop": {"training_iteration": 8},
        "checkpoint": {"frequency": 0, "at_end": True},
    }
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(yaml.safe_dump(spec))
    data = tmp_path / "data"
    run_ = tuner_run(spec_path, data)

    def trained_twice():
        iters = trained_iterations(data)
        return len(iters) == 2 and min(iters) >= 2

    try:
        wait_while_running(run_, trained_twice, "it could be interrupted")
        os.killpg(run_.pid, signal.SIGINT)  # Ctrl-C in a terminal: its whole process group
        out, _ = run_.communicate(timeout=120)
    finally:
        if run_.poll() is None:
            os.killpg(run_.pid, signal.SIGKILL)
            run_.wait()
    assert run_.returncode != 0
    summary = json.loads(out)
    assert summary["status"] == "STOPPED"
    assert len(summary["trials"]) == 2
    assert all(t["status"] == "PAUSED" and 2 <= t["iterations"] < 8 for t in summary["trials"])
    at_stop = {t["trial_id"]: t["iterations"] for t in summary["trials"]}

    again = tuner_run(spec_path, data, "--resume")
    out, _ = again.communicate(timeout=300)
    assert again.returncode == 0, out
    summary = json.loads(out)
    assert all(t["status"] == "TERMINATED" and t["iterations"] == 8 for t in summary["trials"])
    for path in (data / "ray_results").glob("ctrlc_*/TunerPPO_*/result.json"):
        last = json.loads(path.read_text().strip().splitlines()[-1])
        resumed_from = 8 - last["iterations_since_restore"]
        assert resumed_from >= at_stop[last["trial_id"]] - 1 >= 1, (resumed_from, at_stop)
