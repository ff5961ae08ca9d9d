"""A spec's own code by import path, run for real: callbacks whose metrics rank, stop and
reach MLflow; recurrent models on a partially observed env; a custom RLModule."""

from __future__ import annotations

import math

import pytest
import torch

from tests.conftest import TINY_PPO
from tests.integration._tracking import child_runs, sqlite_tracking
from tuner.rllib import trainable_for
from tuner.spec import SpecError, parse_spec
from tuner.sweep import run_sweep, trial_params
from tuner.validation import validate_spec

pytestmark = pytest.mark.integration

STATELESS = "tuner_examples.envs:stateless_cartpole"


def test_callback_metrics_rank_stop_and_reach_mlflow(ray_local, tmp_path):
    spec = parse_spec(
        {
            "name": "callbacks",
            "algorithm": "PPO",
            "env": "CartPole-v1",
            "callbacks": [
                "tuner_examples.callbacks:PoleAngleMax",
                "tuner_examples.callbacks:EpisodeCount",
            ],
            "config": TINY_PPO,
            "model": {"fcnet_hiddens": [8]},
            "search": {"method": "grid", "space": {"lr": {"grid": [1e-4, 1e-3]}}},
            "metric": "env_runners/pole_angle_max",
            "mode": "min",
            "scheduler": {"type": "asha", "grace_period": 1, "max_t": 3},
            # any angle is >= 0: the custom criterion ends each trial at its first result
            "stop": {"training_iteration": 3, "metrics": {"env_runners/pole_angle_max": 0.0}},
            "checkpoint": {"at_end": False},
        }
    )
    validate_spec(spec, allowed_modules=["tuner_examples"])
    tracking = sqlite_tracking(tmp_path)
    summary = run_sweep(spec, storage_path=tmp_path / "tune", progress=False, tracking=tracking)
    assert summary.status == "SUCCEEDED"
    assert [t.iterations for t in summary.trials] == [1, 1]  # stopped by stop.metrics
    for trial in summary.trials:
        assert trial.metric is not None
        assert 0 < trial.metric < 0.25  # radians, CartPole's limit
    assert summary.best.metric_value == min(t.score for t in summary.trials)
    children = child_runs(tracking, summary)
    assert len(children) == 2
    for child in children:
        logged = child.data.metrics
        assert 0 < logged["env_runners/pole_angle_max"] < 0.25
        assert logged["env_runners/episodes_ended"] >= 1  # not the sweep metric: logged too
        assert child.data.params["callbacks"].endswith("EpisodeCount")


def test_code_outside_the_allowed_modules_is_refused_naming_the_field():
    spec = parse_spec(
        {
            "name": "refused",
            "algorithm": "PPO",
            "env": "CartPole-v1",
            "callbacks": "tuner_examples.callbacks:PoleAngleMax",
            "module": "tuner_examples.modules:TwoHeadMLP",
        }
    )
    with pytest.raises(SpecError) as err:
        validate_spec(spec, allowed_modules=["mypkg"])
    assert [(i.loc, i.value) for i in err.value.issues] == [
        ("callbacks.0", "tuner_examples.callbacks:PoleAngleMax"),
        ("module", "tuner_examples.modules:TwoHeadMLP"),
    ]
    wrong = spec.model_copy(update={"callbacks": ["tuner_examples.envs:stateless_cartpole"]})
    with pytest.raises(SpecError) as err:
        validate_spec(wrong, allowed_modules=["tuner_examples"])
    assert err.value.issues[0].loc == "callbacks.0"
    assert "RLlibCallback" in err.value.issues[0].msg


def _lstms_of(module: torch.nn.Module) -> list[torch.nn.LSTM]:
    return [m for m in module.modules() if isinstance(m, torch.nn.LSTM)]


@pytest.mark.parametrize("algorithm", ["PPO", "APPO", "IMPALA"])
def test_lstm_trains_on_a_partially_observed_env(ray_local, algorithm):
    """`model.use_lstm` builds a recurrent module of the spec's cell size on the
    velocity-free CartPole (2 observations) and trains an iteration with finite losses."""
    config = {"train_batch_size_per_learner": 128}
    if algorithm == "PPO":
        config.update(minibatch_size=64, num_epochs=1)
    spec = parse_spec(
        {
            "name": f"lstm-{algorithm}",
            "algorithm": algorithm,
            "env": STATELESS,
            "config": config,
            "model": {
                "use_lstm": True,
                "lstm_cell_size": 16,
                "max_seq_len": 8,
                "fcnet_hiddens": [8],  # RLlib's tokenizer in front of the LSTM
            },
        }
    )
    validate_spec(spec, allowed_modules=["tuner_examples"])
    params = {**trial_params(spec), "seed": 1}
    algo = trainable_for(spec)(config=params)
    try:
        lstms = _lstms_of(algo.get_module())  # one per encoder (policy, value)
        assert lstms
        assert all(m.hidden_size == 16 and m.input_size == 8 for m in lstms)
        first = next(m for m in algo.get_module().modules() if isinstance(m, torch.nn.Linear))
        assert first.in_features == 2  # cart position and pole angle only
        result = algo.train()
    finally:
        algo.stop()
    losses = [v for k, v in result["learners"]["default_policy"].items() if "loss" in k]
    assert losses
    assert all(math.isfinite(v) for v in losses)


def test_custom_module_gets_the_model_config_with_sampled_values(ray_local, tmp_path):
    spec = parse_spec(
        {
            "name": "module",
            "algorithm": "PPO",
            "env": "CartPole-v1",
            "module": "tuner_examples.modules:TwoHeadMLP",
            "config": TINY_PPO,
            "model": {"layers": 2},
            "search": {"method": "grid", "space": {"model.hidden": {"grid": [8, 24]}}},
            "stop": {"training_iteration": 1},
        }
    )
    validate_spec(spec, allowed_modules=["tuner_examples"])
    summary = run_sweep(spec, storage_path=tmp_path, progress=False)
    assert summary.status == "SUCCEEDED"
    assert sorted(t.config["model.hidden"] for t in summary.trials) == [8, 24]
    # the trainable as Tune builds it: the module is ours, shaped by the sampled value
    params = {**trial_params(spec), "seed": 0}
    params["_model_config"] = {**params["_model_config"], "hidden": 24}
    algo = trainable_for(spec)(config=params)
    try:
        module = algo.get_module()
        assert type(module).__name__ == "TwoHeadMLP"
        widths = [m.out_features for m in module.trunk if isinstance(m, torch.nn.Linear)]
        assert widths == [24, 24]
        assert math.isfinite(algo.train()["learners"]["default_policy"]["total_loss"])
    finally:
        algo.stop()


def test_own_replay_buffer_by_import_path_trains(ray_local, tmp_path):
    """`config.replay_buffer_config.type` as an allowed import path: the trial imports the
    class and RLlib's DQN builds and fills it (before, the string reached RLlib, whose
    from_config cannot build "pkg.mod:Name", and the trial errored)."""
    spec = parse_spec(
        {
            "name": "own-buffer",
            "algorithm": "DQN",
            "env": "CartPole-v1",
            "config": {
                "replay_buffer_config": {
                    "type": "tuner_examples.buffers:CountingReplayBuffer",
                    "capacity": 2000,
                },
                "train_batch_size_per_learner": 32,
                "num_steps_sampled_before_learning_starts": 32,
            },
            "model": {"fcnet_hiddens": [16]},
            "search": {"method": "grid", "space": {"lr": {"grid": [1e-3]}}},
            # what only this class logs: a value means RLlib built and sampled from it
            "metric": "replay_buffer/own_buffer_chunks_added",
            "stop": {"training_iteration": 1},
            "resources": {"num_env_runners": 0},
            "checkpoint": {"at_end": False},
        }
    )
    summary = run_sweep(
        spec, storage_path=tmp_path, progress=False, allowed_modules=["tuner_examples"]
    )
    assert summary.status == "SUCCEEDED"
    (trial,) = summary.trials
    assert trial.status == "TERMINATED", trial.error
    assert trial.error is None, trial.error
    assert trial.iterations == 1
    assert trial.metric
    assert trial.metric > 0
