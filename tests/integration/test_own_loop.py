"""`algorithm: "package.module:name"`: a training loop of your own (a generator, a Tune
function, a Trainable subclass) swept, scheduled, stopped and tracked as RLlib trials are."""

from __future__ import annotations

import math

import pytest

from tests.integration._tracking import child_runs, sqlite_tracking
from tuner.spec import SpecError, parse_spec
from tuner.sweep import run_sweep
from tuner.validation import validate_spec

pytestmark = pytest.mark.integration

LOOPS = "tuner_examples.trainables"


def own_loop(algorithm: str, **patch):
    data = {
        "name": "own-loop",
        "algorithm": f"{LOOPS}:{algorithm}",
        "config": {"episodes_per_iteration": 2},
        "metric": "episode_return_mean",
        "search": {"method": "grid", "space": {"lr": {"grid": [0.001, 0.01]}}},
        "stop": {"training_iteration": 3},
        "checkpoint": {"at_end": False},
    }
    data.update(patch)
    return parse_spec(data)


def test_a_generator_is_swept_scheduled_and_tracked(ray_local, tmp_path):
    spec = own_loop(
        "reinforce",
        env="CartPole-v1",
        env_config={"max_episode_steps": 50},
        scheduler={"type": "asha", "grace_period": 1, "max_t": 3},
        stop={"training_iteration": 3, "metrics": {"episodes_total": 4}},
        seed=5,
    )
    assert validate_spec(spec, allowed_modules=["tuner_examples"]) == []
    tracking = sqlite_tracking(tmp_path)
    summary = run_sweep(spec, storage_path=tmp_path / "tune", progress=False, tracking=tracking)
    assert summary.status == "SUCCEEDED", summary
    assert sorted(t.config["lr"] for t in summary.trials) == [0.001, 0.01]
    assert sorted(t.seed for t in summary.trials) == [5, 6]
    # 2 episodes an iteration: stop.metrics (episodes_total >= 4) ends a trial at iteration
    # 2, before training_iteration's 3; ASHA (grace 1) may cut the worse one at 1
    assert max(t.iterations for t in summary.trials) == 2
    assert min(t.iterations for t in summary.trials) >= 1
    for trial in summary.trials:
        assert trial.metric is not None
        assert 1 <= trial.metric <= 50  # max_episode_steps
    assert summary.best.metric_value == max(t.score for t in summary.trials)
    children = child_runs(tracking, summary)
    assert len(children) == 2
    for child in children:
        assert math.isfinite(child.data.metrics["loss"])  # what the loop yields, all of it
        iterations = child.data.metrics["training_iteration"]
        assert child.data.metrics["episodes_total"] == 2 * iterations  # as yielded
        assert child.data.params["algorithm"] == f"{LOOPS}:reinforce"
        assert float(child.data.params["lr"]) in (0.001, 0.01)


def test_a_reporting_function_and_a_trainable_with_checkpoints(ray_local, tmp_path):
    spec = own_loop("reinforce_reporting", confirm={"top_k": 1, "seeds": 2})
    summary = run_sweep(spec, storage_path=tmp_path, progress=False)
    assert summary.status == "SUCCEEDED"
    assert all(t.iterations == 3 and t.metric is not None for t in summary.trials)
    # confirmed like an RLlib sweep: the best config on 2 fresh seeds, each scored
    (confirmed,) = summary.confirmation
    search = [t for t in summary.trials if t.stage == "search"]
    runs = {t.trial_id: t for t in summary.trials if t.stage == "confirm"}
    assert sorted(t.seed for t in search) == [0, 1]
    assert confirmed.seeds == [2, 3]
    assert [runs[i].seed for i in confirmed.trials] == confirmed.seeds
    assert all(runs[i].config == confirmed.config for i in confirmed.trials)
    assert confirmed.scores == [runs[i].score for i in confirmed.trials]
    assert None not in confirmed.scores
    assert confirmed.mean is not None

    spec = own_loop(
        "ReinforceTrainable",
        checkpoint={"frequency": 1, "at_end": True, "num_to_keep": 1},
        search={"method": "grid", "space": {"lr": {"grid": [0.01]}}},
    )
    summary = run_sweep(spec, storage_path=tmp_path / "class", progress=False)
    assert summary.status == "SUCCEEDED"
    (trial,) = summary.trials
    assert trial.iterations == 3
    assert trial.checkpoint
    assert summary.best.checkpoint == trial.checkpoint
    from pathlib import Path

    assert (Path(trial.checkpoint) / "weights.npy").is_file()


def test_an_own_loop_is_checked_before_it_runs():
    with pytest.raises(SpecError) as err:
        validate_spec(own_loop("reinforce"), allowed_modules=["mypkg"])
    assert [(i.loc, i.value) for i in err.value.issues] == [("algorithm", f"{LOOPS}:reinforce")]
    with pytest.raises(SpecError) as err:
        validate_spec(own_loop("Reinforce"), allowed_modules=["tuner_examples"])
    assert err.value.issues[0].loc == "algorithm"
    assert "training loop" in err.value.issues[0].msg
    with pytest.raises(SpecError) as err:  # RLlib settings do not apply
        own_loop("reinforce", model={"fcnet_hiddens": [8]})
    assert "model" in str(err.value)
