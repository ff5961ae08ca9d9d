"""Faults are normal: a trial whose worker process is SIGKILLed mid-run is restarted from
its last checkpoint and finishes; one that keeps dying ends in ERROR after its retries,
the sweep ends PARTIAL, and a resume retries it. After each fault: every trial's
outcome is as reported, no iteration is stored twice (store and MLflow), and MLflow
holds one child run per trial."""

from __future__ import annotations

import os
import signal
from collections import Counter

import pytest
from mlflow.tracking import MlflowClient
from ray import tune

from tests.conftest import tiny_spec
from tuner.mlflow_names import ITERATION_KEY, TAG_ERRORED, TAG_RETRIES, TAG_STATUS, TAG_TRIAL
from tuner.store import Store
from tuner.sweep import run_sweep
from tuner.tracking import StoreRecorder, TrackingConfig

pytestmark = pytest.mark.integration

ITERATIONS = 4
KILL_AT = 2  # the checkpoint of iteration 1 is saved by then


class Killer(tune.Callback):
    """SIGKILLs the worker process of one trial once it reports iteration KILL_AT (the
    worker goes on into its next iteration), at most `times` times (once per worker);
    records the first iteration each later worker reports."""

    def __init__(self, index: int, times: int = 1) -> None:
        self.index = index
        self.times = times
        self.killed: list[int] = []
        self.first_after: list[int] = []

    def on_trial_result(self, iteration, trials, trial, result, **info):
        if not trial.trial_id.endswith(f"_{self.index:05d}"):
            return
        pid, it = result["pid"], result["training_iteration"]
        if self.killed and pid != self.killed[-1] and len(self.first_after) < len(self.killed):
            self.first_after.append(it)
        if it >= KILL_AT and len(self.killed) < self.times and pid not in self.killed:
            self.killed.append(pid)
            os.kill(pid, signal.SIGKILL)


def sweep(tmp_path, **patch):
    spec = tiny_spec(
        name="chaos",
        search={"method": "grid", "space": {"lr": {"grid": [1e-3, 3e-4]}}},
        stop={"training_iteration": ITERATIONS},
        scheduler={"type": "fifo"},  # no trial pruned: each runs its iterations
        checkpoint={"frequency": 1, "at_end": True, "num_to_keep": 1},
        **patch,
    )
    store_url = f"sqlite:///{tmp_path / 'tuner.db'}"
    store = Store(store_url)
    record = store.create_experiment(name=spec.name, spec={}, warnings=[])
    tracking = TrackingConfig(
        tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}",
        artifact_location=(tmp_path / "artifacts").as_uri(),
    )

    def run(*callbacks, resume=False):
        recorder = StoreRecorder(store_url, record.id, spec.metric, spec.mode, ["lr"], spec.seed)
        return run_sweep(
            spec,
            storage_path=tmp_path / "tune",
            name="chaos",
            resume=resume,
            progress=False,
            callbacks=[recorder, *callbacks],
            tracking=tracking,
        )

    return spec, store, record.id, tracking, run


def assert_nothing_twice(store, exp_id, summary, tracking):
    client = MlflowClient(tracking_uri=tracking.tracking_uri)
    children = [
        r for r in client.search_runs([summary.mlflow.experiment_id]) if TAG_TRIAL in r.data.tags
    ]
    # one child run per trial
    assert sorted(r.data.tags[TAG_TRIAL] for r in children) == sorted(
        t.trial_id for t in summary.trials
    )
    for run in children:
        steps = [m.value for m in client.get_metric_history(run.info.run_id, ITERATION_KEY)]
        assert not [s for s, n in Counter(steps).items() if n > 1], (run.data.tags, steps)
    for trial in summary.trials:
        stored = [p.iteration for p in store.metric_history(exp_id, trial.trial_id)]
        assert stored == sorted(set(stored)), stored
    return {r.data.tags[TAG_TRIAL]: r for r in children}


def test_a_trial_whose_worker_is_killed_is_retried_from_its_checkpoint(ray_local, tmp_path):
    spec, store, exp_id, tracking, run = sweep(tmp_path)
    killer = Killer(index=0)
    summary = run(killer)
    assert len(killer.killed) == 1
    # the retry restored a checkpoint: it went on from iteration 2 or 3, not from 1
    assert killer.first_after
    assert killer.first_after[0] >= KILL_AT
    assert summary.status == "SUCCEEDED", summary
    trials = {t.trial_id: t for t in summary.trials}
    killed = next(t for t in trials if t.endswith("_00000"))
    assert {t.status for t in trials.values()} == {"TERMINATED"}
    assert [trials[t].retries for t in sorted(trials)] == [1, 0]
    assert trials[killed].iterations == ITERATIONS
    # restored from the checkpoint of iteration 1, not from the start
    history = store.metric_history(exp_id, killed)
    assert [p.iteration for p in history] == list(range(1, ITERATIONS + 1))
    stored = {t.trial_id: t for t in store.list_trials(exp_id)}
    assert stored[killed].retries == 1
    assert stored[killed].status == "TERMINATED"
    runs = assert_nothing_twice(store, exp_id, summary, tracking)
    assert runs[killed].data.tags[TAG_RETRIES] == "1"
    assert runs[killed].info.status == "FINISHED"


def test_a_trial_that_keeps_dying_ends_partial_and_a_resume_retries_it(ray_local, tmp_path):
    spec, store, exp_id, tracking, run = sweep(tmp_path, max_failures=1)
    killer = Killer(index=0, times=2)
    summary = run(killer)
    assert len(killer.killed) == 2  # the first run, then its one retry
    assert summary.status == "PARTIAL"
    trials = {t.trial_id: t for t in summary.trials}
    failed = next(t for t in trials if t.endswith("_00000"))
    assert trials[failed].status == "ERROR"
    assert trials[failed].retries == 1
    assert trials[failed].error
    assert summary.best.trial_id != failed
    assert any(failed in w and "failed for good" in w for w in summary.warnings)
    runs = assert_nothing_twice(store, exp_id, summary, tracking)
    assert runs[failed].data.tags[TAG_RETRIES] == "1"
    client = MlflowClient(tracking_uri=tracking.tracking_uri)
    parent = client.get_run(summary.mlflow.parent_run_id)
    assert parent.data.tags[TAG_STATUS] == "PARTIAL"
    assert parent.data.tags[TAG_ERRORED] == "1"
    assert summary.mlflow.model_version is not None  # the best of the finished ones

    # a resume retries the failed trial from its checkpoint (the count carries over)
    resumed = run(resume=True)
    assert resumed.status == "SUCCEEDED", resumed
    again = {t.trial_id: t for t in resumed.trials}
    assert again[failed].status == "TERMINATED"
    assert again[failed].retries == 2
    assert again[failed].iterations == ITERATIONS
    assert_nothing_twice(store, exp_id, resumed, tracking)
