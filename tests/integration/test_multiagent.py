"""A real multi-agent sweep: an RLlib MultiAgentEnv by import path, one PPO policy per
agent, ranked by one agent's return, tracked in MLflow."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import tiny_spec
from tuner.rllib import evaluate_checkpoint
from tuner.sweep import run_sweep
from tuner.tracking import TrackingConfig

pytestmark = pytest.mark.integration

ENV = "tuner_examples.multiagent:MultiCartPole"
METRIC = "env_runners/agent_episode_returns_mean/cart_0"
POLICIES = ("left", "right")


@pytest.fixture(scope="module")
def sweep(ray_local, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("multiagent")
    uri = f"sqlite:///{tmp / 'mlflow.db'}"
    spec = tiny_spec(
        name="multiagent",
        env=ENV,
        env_config={"pole_lengths": [0.5, 1.0]},
        multi_agent={"policies": list(POLICIES), "policy_mapping": {"cart_1": "right"}},
        metric=METRIC,
        search={"method": "grid", "space": {"lr": {"grid": [1e-4, 1e-3]}}},
        stop={"training_iteration": 2},
        checkpoint={"at_end": True, "num_to_keep": 1},
        max_concurrent_trials=1,
    )
    summary = run_sweep(
        spec,
        storage_path=tmp / "tune",
        progress=False,
        tracking=TrackingConfig(tracking_uri=uri, artifact_location=(tmp / "a").as_uri()),
        allowed_modules=["tuner_examples"],
    )
    return summary, MlflowClient(tracking_uri=uri)


def tune_results(summary, trial_id):
    """Every result Tune recorded for a trial (its result.json), as RLlib reported it."""
    (trial_dir,) = [p for p in Path(summary.path).iterdir() if trial_id in p.name]
    lines = (trial_dir / "result.json").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def test_both_policies_train(sweep):
    summary, _ = sweep
    assert summary.status == "SUCCEEDED"
    assert [t.status for t in summary.trials] == ["TERMINATED", "TERMINATED"], summary.trials
    for trial in summary.trials:
        results = tune_results(summary, trial.trial_id)
        assert [r["training_iteration"] for r in results] == [1, 2]
        for result in results:
            learners = result["learners"]
            for pid in POLICIES:
                assert math.isfinite(learners[pid]["total_loss"]), (pid, learners[pid])
                assert math.isfinite(learners[pid]["policy_loss"])
                assert learners[pid]["num_module_steps_trained"] > 0
            assert "default_policy" not in learners
            # cart_0 (first policy, by default) and cart_1 (mapped) both finished episodes
            agents = result["env_runners"]["agent_episode_returns_mean"]
            modules = result["env_runners"]["module_episode_returns_mean"]
            assert set(agents) == {"cart_0", "cart_1"}
            assert set(modules) == set(POLICIES)
            assert result["env_runners"]["episode_return_mean"] == pytest.approx(
                sum(agents.values())
            )


def test_trials_are_ranked_by_one_agents_return(sweep):
    summary, _ = sweep
    assert summary.metric == METRIC
    for trial in summary.trials:
        last = tune_results(summary, trial.trial_id)[-1]
        assert trial.metric == pytest.approx(
            last["env_runners"]["agent_episode_returns_mean"]["cart_0"]
        )
        assert trial.score is not None
        assert trial.best_metric is not None
    assert summary.best is not None
    assert summary.best.metric_value is not None
    assert summary.best.metric_value == max(t.score for t in summary.trials)


def test_mlflow_child_runs_hold_per_agent_and_per_policy_metrics(sweep):
    summary, client = sweep
    parent = client.get_run(summary.mlflow.parent_run_id)
    assert parent.data.metrics[f"best.{METRIC}"] == pytest.approx(summary.best.metric_value)
    for trial in summary.trials:
        run = client.get_run(trial.mlflow_run_id)
        history = client.get_metric_history(run.info.run_id, METRIC)
        assert [m.step for m in history] == sorted(m.step for m in history)
        assert len(history) == 2
        assert history[-1].value == pytest.approx(trial.metric)
        metrics = run.data.metrics
        assert "env_runners/agent_episode_returns_mean/cart_1" in metrics
        for pid in POLICIES:
            assert f"env_runners/module_episode_returns_mean/{pid}" in metrics
            assert math.isfinite(metrics[f"learners/{pid}/total_loss"])


def test_the_best_checkpoint_evaluates_each_agent_with_its_policy(sweep):
    summary, _ = sweep
    meta = json.loads((Path(summary.best.checkpoint) / "tuner.json").read_text())
    assert meta["multi_agent"] == {
        "policies": list(POLICIES),
        "policy_mapping": {"cart_1": "right", "*": "left"},
    }
    result = evaluate_checkpoint(summary.best.checkpoint, episodes=2)
    assert set(result.agent_returns) == {"cart_0", "cart_1"}
    assert set(result.module_returns) == set(POLICIES)
    # each agent is alone on its policy: the policy's return is the agent's
    assert result.module_returns["left"] == result.agent_returns["cart_0"]
    assert result.module_returns["right"] == result.agent_returns["cart_1"]
    for i, total in enumerate(result.returns):
        assert total == pytest.approx(sum(r[i] for r in result.agent_returns.values()))
    assert result.score(METRIC) == pytest.approx(sum(result.agent_returns["cart_0"]) / 2)
    with pytest.raises(ValueError, match="single-agent"):
        evaluate_checkpoint(summary.best.checkpoint, episodes=1, render_to=Path("unused"))
