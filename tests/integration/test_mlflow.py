"""MLflow tracking on a real SQLite store with real RLlib training."""

from __future__ import annotations

import json
import math
from importlib import metadata

import mlflow
import pytest
import torch
from mlflow.tracking import MlflowClient

from tests.conftest import tiny_spec
from tuner.rllib import evaluate_checkpoint
from tuner.rllib._machine import cpu_description
from tuner.sweep import run_sweep
from tuner.tracking import TrackingConfig

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def tracked_sweep(ray_local, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("mlflow")
    uri = f"sqlite:///{tmp / 'mlflow.db'}"
    mlflow.set_tracking_uri("sqlite:////nonexistent/host-process.db")  # a host's own choice
    spec = tiny_spec(
        name="tracked",
        search={
            "method": "random",
            "num_samples": 3,
            "space": {"lr": {"loguniform": [1e-4, 1e-3]}, "gamma": {"choice": [0.9, 0.99]}},
        },
        stop={"training_iteration": 2},
        checkpoint={"frequency": 1, "at_end": True, "num_to_keep": 1},
    )
    tracking = TrackingConfig(
        tracking_uri=uri,
        artifact_location=(tmp / "artifacts").as_uri(),
        ui_url="http://127.0.0.1:5000",
    )
    summary = run_sweep(spec, storage_path=tmp / "tune", progress=False, tracking=tracking)
    yield summary, MlflowClient(tracking_uri=uri), uri
    mlflow.set_tracking_uri(None)


def runs_of(client, summary):
    runs = client.search_runs([summary.mlflow.experiment_id])
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    return parents, children


def test_one_parent_and_a_nested_child_per_trial(tracked_sweep):
    summary, client, _ = tracked_sweep
    parents, children = runs_of(client, summary)
    assert len(parents) == 1
    assert len(children) == 3
    parent = parents[0]
    assert parent.info.run_id == summary.mlflow.parent_run_id
    assert {c.data.tags["mlflow.parentRunId"] for c in children} == {parent.info.run_id}
    assert parent.data.tags["tuner.algorithm"] == "PPO"
    assert parent.data.tags["ray.version"].startswith("2.")
    assert parent.data.tags["torch.version"] == metadata.version("torch")
    assert parent.data.tags["optuna.version"] == metadata.version("optuna")
    # MLflow 3's UI opens the experiment in its model-training view, not the GenAI one
    experiment = client.get_experiment(summary.mlflow.experiment_id)
    assert experiment.tags["mlflow.experimentKind"] == "custom_model_development"
    assert {a.path for a in client.list_artifacts(parent.info.run_id)} >= {
        "spec.yaml",
        "best_config.json",
        "trials.csv",
        "trials.json",
        "learning_curves.png",
    }
    assert f"/runs/{parent.info.run_id}?workflowType=machine_learning" in summary.mlflow.url


def test_child_params_and_metric_history(tracked_sweep):
    summary, client, _ = tracked_sweep
    _, children = runs_of(client, summary)
    by_trial = {c.data.tags["tuner.trial_id"]: c for c in children}
    for trial in summary.trials:
        run = by_trial[trial.trial_id]
        assert trial.mlflow_run_id == run.info.run_id
        assert float(run.data.params["lr"]) == pytest.approx(trial.config["lr"])
        assert float(run.data.params["gamma"]) == trial.config["gamma"]
        assert int(run.data.params["seed"]) == trial.seed
        assert run.data.params["fixed.train_batch_size_per_learner"] == "128"
        assert len(run.data.params) < 20  # curated, not the whole RLlib config
        history = client.get_metric_history(run.info.run_id, "env_runners/episode_return_mean")
        assert len(history) == trial.iterations == 2
        assert [m.step for m in history] == sorted(m.step for m in history)
        assert history[-1].step == trial.env_steps
        assert "learners/default_policy/total_loss" in run.data.metrics
        assert run.info.status == "FINISHED"
        assert run.data.tags["tuner.device"] == "cpu"
        assert run.data.tags["tuner.node_id"]
        # the CPU and kernels it trained on: a seed trains the same numbers only there
        assert run.data.tags["tuner.cpu"] == cpu_description()
        assert trial.cpu == cpu_description()  # the summary (CLI, JSON) names it too
        assert torch.backends.cpu.get_cpu_capability() in run.data.tags["tuner.cpu"]
        assert "tuner.replay" not in run.data.tags  # PPO replays nothing
        ckpts = [a.path for a in client.list_artifacts(run.info.run_id, "checkpoints")]
        assert len(ckpts) == 1  # num_to_keep: 1


def test_parent_carries_the_best_config(tracked_sweep):
    summary, client, _ = tracked_sweep
    parent = client.get_run(summary.mlflow.parent_run_id)
    best = summary.best
    assert parent.data.params["best.trial_id"] == best.trial_id
    assert float(parent.data.params["best.lr"]) == pytest.approx(best.config["lr"])
    assert float(parent.data.params["best.gamma"]) == best.config["gamma"]
    assert parent.data.metrics["best.env_runners/episode_return_mean"] == pytest.approx(
        best.metric_value
    )
    # a budget (2 iterations): ranked by the final deterministic evaluation, and the
    # answer says so; the training return under scope (last-5-avg) stays beside it
    assert best.metric_value == max(t.score for t in summary.trials)
    assert summary.ranked_by == "evaluation/env_runners/episode_return_mean"
    assert best.scope == "final-evaluation"
    assert all(t.best_metric >= t.train_score for t in summary.trials)


def test_best_checkpoint_is_registered_and_evaluates(tracked_sweep):
    summary, client, uri = tracked_sweep
    assert summary.mlflow.model_version == "models:/tracked-best/1"
    version = client.get_model_version("tracked-best", "1")
    assert version.run_id == summary.mlflow.best_run_id
    result = evaluate_checkpoint(summary.mlflow.model_version, episodes=2, tracking_uri=uri)
    assert result.episodes == 2
    assert math.isfinite(result.mean_return)
    assert result.mean_return > 0
    by_run = evaluate_checkpoint(version.source, episodes=1, tracking_uri=uri)
    assert by_run.returns
    assert by_run.env == "CartPole-v1"


def test_cli_evaluates_the_latest_version_without_rllibs_deprecation_noise(tracked_sweep):
    """`tuner evaluate models:/<name>/latest` (TUNER_MLFLOW_TRACKING_URI's registry)
    plays the newest version, and the restore logs no RLlib DeprecationWarning (RLlib's
    own RLModule builds the deprecated RLModuleConfig: nothing the user can act on)."""
    import os
    import subprocess
    import sys

    _, _, uri = tracked_sweep
    out = subprocess.run(
        [sys.executable, "-m", "tuner.cli", "evaluate", "models:/tracked-best/latest"]
        + ["--episodes", "1", "--output", "json"],
        env={**os.environ, "TUNER_MLFLOW_TRACKING_URI": uri},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout)["env"] == "CartPole-v1"
    assert "DeprecationWarning" not in out.stderr, out.stderr[-3000:]


def test_host_process_tracking_uri_untouched(tracked_sweep):
    assert mlflow.get_tracking_uri() == "sqlite:////nonexistent/host-process.db"


def test_mlflow_ui_server_lists_the_sweep_with_nested_children(tracked_sweep, tmp_path):
    import socket
    import time
    from pathlib import Path

    import httpx

    from tuner.launcher import start_mlflow_ui, stop_process_group
    from tuner.settings import Settings

    summary, _, uri = tracked_sweep
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # The same function `tuner serve --mlflow-ui` (make run) uses, over the sweep's store.
    data_dir = Path(uri.removeprefix("sqlite:///")).parent
    server = start_mlflow_ui(Settings(data_dir=data_dir), port)
    base = f"http://127.0.0.1:{port}/api/2.0/mlflow"
    try:
        deadline = time.time() + 90
        while True:
            try:
                exp = httpx.get(
                    f"{base}/experiments/get-by-name",
                    params={"experiment_name": "tracked"},
                    timeout=5,
                )
                if exp.status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.time() < deadline, "mlflow server did not start"
            assert server.poll() is None, "mlflow server did not start"
            time.sleep(0.5)
        exp_id = exp.json()["experiment"]["experiment_id"]
        runs = httpx.post(
            f"{base}/runs/search", json={"experiment_ids": [exp_id]}, timeout=10
        ).json()["runs"]
        tags = [{t["key"]: t["value"] for t in r["data"].get("tags", [])} for r in runs]
        parent = summary.mlflow.parent_run_id
        assert sum(1 for t in tags if t.get("mlflow.parentRunId") == parent) == 3
        assert any(r["info"]["run_id"] == parent for r in runs)
        page = httpx.get(f"http://127.0.0.1:{port}/", timeout=10)
        assert page.status_code == 200  # the UI itself is served
    finally:
        stop_process_group(server)  # the server this test started


def test_a_sampled_renamed_key_is_reported_as_rllib_used_it(ray_local, tmp_path):
    """DQN's default space samples train_batch_size_per_learner, which RLlib keeps as
    `_train_batch_size_per_learner` (issue #10: it was reported null). `tuner run --output
    json` (trials, best), the MLflow child run's params and the config RLlib built the
    trial's algorithm with (saved in its checkpoint) hold the same value for every key."""
    import json
    import pickle
    from pathlib import Path

    import yaml
    from typer.testing import CliRunner

    from tuner.cli import app

    spec = {
        "name": "dqn-default-space",
        "algorithm": "DQN",
        "env": "CartPole-v1",
        "config": {
            "num_steps_sampled_before_learning_starts": 32,
            # 8 vectorised envs (the flat path's defaults): 32 steps each, episodes end
            "min_sample_timesteps_per_iteration": 256,
        },
        "model": {"fcnet_hiddens": [16]},
        "search": {"method": "random", "num_samples": 1},  # no space: DQN's default
        "stop": {"training_iteration": 1},
        "checkpoint": {"at_end": True},
    }
    path = tmp_path / "dqn.yaml"
    path.write_text(yaml.safe_dump(spec))
    data = tmp_path / "data"
    ran = CliRunner().invoke(app, ["run", str(path), "--output", "json", "--data-dir", str(data)])
    assert ran.exit_code == 0, ran.output
    out = json.loads(ran.stdout)
    (trial,) = out["trials"]
    assert trial["status"] == "TERMINATED", trial["error"]
    sampled = trial["config"]
    assert sampled["train_batch_size_per_learner"] in (32, 64, 128, 256)
    assert set(sampled) == {
        "lr",
        "gamma",
        "train_batch_size_per_learner",
        "target_network_update_freq",
        "updates_per_env_step",  # the update ratio, searched apart from the batch
    }
    ratio = sampled.pop("updates_per_env_step")  # tuner's key: RLlib runs the intensity
    intensity = ratio * sampled["train_batch_size_per_learner"]
    assert out["best"]["full_config"]["n_step"] == 3  # DQN's own, fixed (presets.yaml)
    assert out["best"]["config"] == {**sampled, "updates_per_env_step": ratio}
    assert {k: out["best"]["full_config"][k] for k in sampled} == sampled
    assert "updates_per_env_step" not in out["best"]["full_config"]  # pasted: refused
    ctor = pickle.loads((Path(trial["checkpoint"]) / "class_and_ctor_args.pkl").read_bytes())
    used = ctor["ctor_args_and_kwargs"][0][0]  # RLlib's own config state of the trial
    params = (
        MlflowClient(tracking_uri=f"sqlite:///{data / 'mlflow.db'}")
        .get_run(trial["mlflow_run_id"])
        .data.params
    )
    for key, value in sampled.items():
        assert value is not None, key
        assert (used[key] if key in used else used[f"_{key}"]) == value, key
        assert json.loads(params[key]) == value, (key, params[key])
    assert used["_train_batch_size_per_learner"] == sampled["train_batch_size_per_learner"]
    assert json.loads(params["updates_per_env_step"]) == ratio
    assert used["training_intensity"] == pytest.approx(intensity)  # ratio x batch, in RLlib
    assert float(params["fixed.training_intensity"]) == pytest.approx(intensity)
    # what the trial set beyond the spec is a param too, as RLlib ran it: the flat path's
    # 8 envs x 4-step rounds (the searched ratio's training_intensity is the one it ran)
    assert used["num_envs_per_env_runner"] == 8
    for key in ("num_envs_per_env_runner", "rollout_fragment_length"):
        assert float(params[f"fixed.{key}"]) == pytest.approx(used[key]), key
    # and the best config to paste is the one that ran: the derived ratio under `config`,
    # the default's env count under `resources`
    best = out["best"]
    for key in ("rollout_fragment_length", "training_intensity"):
        assert best["full_config"][key] == pytest.approx(used[key]), key
    assert best["resources"] == {"num_envs_per_env_runner": 8}
    logged = MlflowClient(tracking_uri=f"sqlite:///{data / 'mlflow.db'}").download_artifacts(
        out["mlflow"]["parent_run_id"], "best_config.json", str(tmp_path)
    )
    assert json.loads(Path(logged).read_text())["resources"] == best["resources"]


def test_a_server_start_that_fails_leaves_no_mlflow_ui_behind(tmp_path, monkeypatch):
    """`tuner serve --mlflow-ui` starts the UI before the Ray head: a head that cannot start
    (a fresh machine without a Ray token did this) ends the server, and the UI with it."""
    import socket

    from fastapi.testclient import TestClient

    from tuner.api import _app
    from tuner.settings import Settings

    started = []
    real_start = _app.start_mlflow_ui

    def recording_start(settings, port):
        started.append(real_start(settings, port))
        return started[-1]

    def no_head(self, num_cpus=None):
        raise RuntimeError("the embedded Ray head exited with code 1")

    monkeypatch.setattr(_app, "start_mlflow_ui", recording_start)
    monkeypatch.setattr(_app.Launcher, "start", no_head)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    app = _app.create_app(Settings(data_dir=tmp_path / "data"), mlflow_ui_port=port)
    with pytest.raises(RuntimeError, match="Ray head"):
        with TestClient(app, base_url="http://127.0.0.1"):
            pass
    assert len(started) == 1
    assert started[0].poll() is not None  # stopped, its process group with it


def test_an_experiment_made_without_the_kind_gets_it(tmp_path):
    """An experiment made before we tagged it (or by hand) is tagged when a sweep joins it."""
    from tests.conftest import tiny_spec
    from tuner.tracking import MLflowTracker

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    # its artifacts under tmp_path: MLflow's default root is ./mlruns in the cwd
    old = client.create_experiment("tiny", artifact_location=(tmp_path / "a").as_uri())
    assert "mlflow.experimentKind" not in client.get_experiment(old).tags
    tracker = MLflowTracker(
        tiny_spec(), tracking_uri=uri, run_name="r1", space_keys=[], experiment_name="tiny"
    )
    tracker.start()
    assert tracker.experiment_id == old
    assert client.get_experiment(old).tags["mlflow.experimentKind"] == "custom_model_development"


def test_a_rescored_search_names_its_new_best_in_mlflow(ray_local, tmp_path):
    """`rescore` (the service: each trial's numbers from its whole curve in the store,
    which a resume leaves longer than Tune's history) runs before the best is chosen and
    MLflow records it: the parent run names the rescored best, not Tune's."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    spec = tiny_spec(
        name="rescored",
        search={
            "method": "random",
            "num_samples": 3,
            "space": {"lr": {"choice": [1e-4, 3e-4, 1e-3]}},
        },
        stop={"training_iteration": 1},
    )
    tune_order: list[str] = []

    def worst_first(found):  # scores turned around: the worst trial becomes the best
        ranked = sorted(found.trials, key=lambda t: t.score)
        tune_order.extend(t.trial_id for t in ranked)
        for place, trial in enumerate(ranked):
            trial.score = -float(place)  # distinct: no tie to break

    tracking = TrackingConfig(tracking_uri=uri, artifact_location=(tmp_path / "a").as_uri())
    summary = run_sweep(
        spec,
        storage_path=tmp_path / "tune",
        progress=False,
        tracking=tracking,
        rescore=worst_first,
    )
    worst = tune_order[0]
    assert summary.best.trial_id == worst
    assert summary.best.metric_value == max(t.score for t in summary.trials)
    parent = MlflowClient(tracking_uri=uri).get_run(summary.mlflow.parent_run_id)
    assert parent.data.params["best.trial_id"] == worst
