"""The confirmation stage, end to end through `tuner run` on real Ray, RLlib and MLflow:
the search's best configs re-run on fresh seeds; a Ctrl-C during the confirmation and
`--resume` continue it without re-running any search trial."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import yaml
from mlflow.tracking import MlflowClient

from tests.conftest import tiny_spec
from tests.integration._cli import (
    RESUMABLE,
    trained_iterations,
    tuner_run,
    wait_while_running,
)
from tuner import mlflow_names as names
from tuner.rllib import evaluate_checkpoint
from tuner.sweep import run_sweep
from tuner.tracking import TrackingConfig

SPEC = {
    **RESUMABLE,
    "name": "confirmed",
    "stop": {"training_iteration": 3},
    "checkpoint": {"frequency": 0, "at_end": True},
    "scope": "last",
    "confirm": {"top_k": 2, "seeds": 2},
    "seed": 7,
}


def lines(path: Path) -> int:
    return len(path.read_text().splitlines())


def test_confirmation_ranks_configs_on_fresh_seeds_and_survives_ctrl_c(tmp_path):
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(yaml.safe_dump(SPEC))
    data = tmp_path / "data"
    results = data / "ray_results"
    run_ = tuner_run(spec_path, data)

    def confirming():
        return any(v >= 1 for v in trained_iterations(data, names.STAGE_CONFIRM))

    try:
        wait_while_running(run_, confirming, "the confirmation stage trained", timeout=400)
        search_iters = {
            p.parent.name: lines(p)
            for p in results.glob("confirmed_????????-??????/TunerPPO_*/result.json")
        }
        os.killpg(run_.pid, signal.SIGINT)  # Ctrl-C during the confirmation
        out, _ = run_.communicate(timeout=180)
    finally:
        if run_.poll() is None:
            os.killpg(run_.pid, signal.SIGKILL)
            run_.wait()
    stopped = json.loads(out)
    assert run_.returncode != 0
    assert stopped["status"] == "STOPPED"
    assert len(search_iters) == 2
    assert set(search_iters.values()) == {3}

    again = tuner_run(spec_path, data, "--resume")
    out, _ = again.communicate(timeout=600)
    assert again.returncode == 0, (data / "stderr.log").read_text()[-3000:]
    summary = json.loads(out)
    # no search trial ran again: their histories are as they were at the Ctrl-C
    for path in results.glob("confirmed_????????-??????/TunerPPO_*/result.json"):
        assert lines(path) == search_iters[path.parent.name]

    search = [t for t in summary["trials"] if t["stage"] == "search"]
    confirm = [t for t in summary["trials"] if t["stage"] == "confirm"]
    assert len(search) == 2
    assert len(confirm) == 4
    assert all(t["status"] == "TERMINATED" and t["iterations"] == 3 for t in confirm)
    search_seeds = {t["seed"] for t in search}
    confirmation = summary["confirmation"]
    assert len(confirmation) == 2
    means = [c["mean"] for c in confirmation]
    assert means == sorted(means, reverse=True)  # mode max: best mean first
    by_id = {t["trial_id"]: t for t in summary["trials"]}
    for c in confirmation:
        assert set(c["seeds"]).isdisjoint(search_seeds)
        assert len(c["seeds"]) == 2
        assert c["trial_id"] in {t["trial_id"] for t in search}
        runs = [by_id[t] for t in c["trials"]]
        assert [r["seed"] for r in runs] == c["seeds"]
        assert all(r["config"] == c["config"] for r in runs)
        assert c["scores"] == [r["score"] for r in runs]  # each seed's final evaluation
        assert c["ci95"][0] <= c["mean"] <= c["ci95"][1]
        assert c["std"] >= 0
        assert min(c["scores"]) <= c["iqm"] <= max(c["scores"])
    # one answer: the confirmed winner is `best`, its model the median seed's checkpoint
    best = summary["best"]
    assert best["source"] == names.STAGE_CONFIRM
    assert best["confirmed"] == confirmation[0]
    assert best["trial_id"] == confirmation[0]["trial_id"]
    assert best["config"] == confirmation[0]["config"]
    assert best["checkpoint"] == confirmation[0]["checkpoint"]
    assert best["checkpoint_trial_id"] == confirmation[0]["median_trial_id"]
    assert best["seed"] == by_id[confirmation[0]["median_trial_id"]]["seed"]
    assert best["model_version"] == summary["mlflow"]["model_version"]
    # a budget (3 iterations): every score is a final deterministic evaluation, said so
    assert summary["ranked_by"] == "evaluation/env_runners/episode_return_mean"
    assert best["scope"] == "final-evaluation"
    top_search = max(search, key=lambda t: t["score"])
    assert best["search_best"]["trial_id"] == top_search["trial_id"]
    assert best["search_best"]["metric_value"] == top_search["score"]

    client = MlflowClient(tracking_uri=f"sqlite:///{data / 'mlflow.db'}")
    parent = client.get_run(summary["mlflow"]["parent_run_id"])
    assert parent.data.metrics[names.CONFIRMED_MEAN] == confirmation[0]["mean"]
    assert parent.data.metrics[names.CONFIRMED_STD] == confirmation[0]["std"]
    assert parent.data.metrics[names.CONFIRMED_CI_LOW] == confirmation[0]["ci95"][0]
    assert parent.data.metrics[names.CONFIRMED_CI_HIGH] == confirmation[0]["ci95"][1]
    children = client.search_runs(
        [summary["mlflow"]["experiment_id"]],
        filter_string=f"tags.`{names.TAG_PARENT}` = '{parent.info.run_id}'",
    )
    stages = sorted(r.data.tags[names.TAG_STAGE] for r in children)
    assert stages == ["confirm"] * 4 + ["search"] * 2  # one child per trial, none twice
    # the registered model is the best confirmed config's median-score seed
    median = by_id[confirmation[0]["median_trial_id"]]
    version = summary["mlflow"]["model_version"].rsplit("/", 1)[-1]
    registered = client.get_model_version(names.registered_model("confirmed"), version)
    assert registered.run_id == median["mlflow_run_id"]
    assert registered.source.endswith(Path(confirmation[0]["checkpoint"]).name)
    # the parent run and the model version name the same answer
    assert parent.data.tags[names.TAG_BEST_TRIAL] == best["trial_id"]
    assert parent.data.tags[names.TAG_BEST_SOURCE] == names.STAGE_CONFIRM
    assert parent.data.tags[names.TAG_BEST_MODEL] == best["model_version"]
    for key, value in best["config"].items():
        logged = parent.data.params.get(f"{names.BEST_PREFIX}{key}")
        moved = parent.data.tags.get(f"{names.MOVED_PARAM_PREFIX}{names.BEST_PREFIX}{key}")
        assert (moved or logged) == str(value)
    assert json.loads(registered.tags[names.TAG_MODEL_CONFIG]) == best["config"]
    assert registered.tags[names.TAG_MODEL_SEED] == str(best["seed"])
    assert float(registered.tags[names.TAG_MODEL_SCORE]) == confirmation[0]["mean"]
    assert f"mean {confirmation[0]['mean']:.4g}" in registered.description


def test_with_evaluation_a_seeds_score_is_its_final_deterministic_evaluation(ray_local, tmp_path):
    spec = tiny_spec(
        name="confirm-eval",
        search={"method": "grid", "space": {"lr": {"grid": [1e-3]}}},
        evaluation={"interval": 1, "duration": 2},
        confirm={"top_k": 1, "seeds": 2},
        seed=3,
    )
    tune_dir = tmp_path / "tune"
    at_search_end = []  # what the driver stores before the confirmation starts

    def search_ended(found):
        started = [p.name for p in tune_dir.iterdir() if p.name.endswith("-confirm")]
        at_search_end.append(([t.model_copy() for t in found.trials], started))

    summary = run_sweep(
        spec,
        storage_path=tune_dir,
        progress=False,
        tracking=TrackingConfig(
            tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}",
            artifact_location=(tmp_path / "a").as_uri(),
        ),
        on_search_end=search_ended,
    )
    assert summary.status == "SUCCEEDED", summary
    # once, before the confirmation's Tune run began: the search trial with its final
    # score, checkpoint and MLflow run (a driver that dies in the confirmation loses none)
    ((found, started),) = at_search_end
    (searched,) = found
    assert started == []
    final = next(t for t in summary.trials if t.trial_id == searched.trial_id)
    assert searched.stage == "search"
    assert searched.score is not None
    assert searched.mlflow_run_id is not None
    assert (searched.score, searched.mlflow_run_id, searched.checkpoint) == (
        final.score,
        final.mlflow_run_id,
        final.checkpoint,
    )
    (confirmed,) = summary.confirmation
    by_id = {t.trial_id: t for t in summary.trials}
    runs = [by_id[t] for t in confirmed.trials]
    assert [r.seed for r in runs] == confirmed.seeds == [4, 5]
    # each seed's score: its final checkpoint played for evaluation.duration deterministic
    # episodes from its own seed (what `tuner evaluate CKPT --episodes 2` gives: the
    # checkpoint's seed is the default)
    played = [evaluate_checkpoint(r.checkpoint, episodes=2) for r in runs]
    assert [p.seed for p in played] == [r.seed for r in runs]
    assert confirmed.scores == [p.mean_return for p in played]
    assert all(len(p.returns) == 2 for p in played)
    # ... which is the trial's own score, not its (stochastic) training return
    assert confirmed.scores == [r.score for r in runs]
    assert confirmed.scores != [r.train_score for r in runs]
    assert confirmed.mean == sum(confirmed.scores) / 2
    # the same checkpoint by URI (how a Tune storage on an object store names it) is
    # downloaded through pyarrow and scores the same
    uri = Path(runs[0].checkpoint).as_uri()
    assert (
        evaluate_checkpoint(uri, episodes=2, seed=runs[0].seed).mean_return == played[0].mean_return
    )
    assert not [w for w in summary.warnings if "has no score" in w]


def test_a_search_stopped_on_target_goes_on_to_its_confirmation(ray_local, tmp_path):
    """`stop_on_target` ends the search with its trials' Tune log files still open; the
    confirmation stage then builds its own Tuner, which pickles its run config (callbacks
    included). Tune's loggers of the search must not be among them (they were: a
    PicklingError, "Cannot pickle files that are not opened for reading", and the sweep
    of experiments/cartpole-ppo.yaml failed after its search)."""
    spec = tiny_spec(
        name="confirm-on-target",
        search={"method": "grid", "space": {"lr": {"grid": [1e-3, 1e-4]}}},
        # any episode returns >= 1: the first trial to report stops the search
        stop={"episode_return_mean": 1, "training_iteration": 3, "stop_on_target": True},
        max_concurrent_trials=2,
        confirm={"top_k": 1, "seeds": 2},
        seed=5,
    )
    callbacks: list = []
    summary = run_sweep(spec, storage_path=tmp_path / "tune", progress=False, callbacks=callbacks)
    assert summary.status == "SUCCEEDED", summary
    assert callbacks == []  # Tune added its loggers to its own copy, not to ours
    (confirmed,) = summary.confirmation
    assert len(confirmed.trials) == 2
    confirm = [t for t in summary.trials if t.stage == "confirm"]
    assert [t.status for t in confirm] == ["TERMINATED"] * 2
