"""Every algorithm and preset builds from a spec and trains one real iteration."""

from __future__ import annotations

import math

import pytest

from tuner.spec import ALGORITHMS, PRESETS, parse_spec
from tuner.trials import build_config, validate_spec

pytestmark = pytest.mark.integration

# Tiny budgets; the off-policy ones learn from the first steps.
TINY = {
    "PPO": {"train_batch_size_per_learner": 64, "minibatch_size": 32, "num_epochs": 1},
    "APPO": {"train_batch_size_per_learner": 64},
    "IMPALA": {"train_batch_size_per_learner": 64},
    "DQN": {
        "train_batch_size_per_learner": 16,
        "num_steps_sampled_before_learning_starts": 32,
        "min_sample_timesteps_per_iteration": 64,
    },
    "SAC": {
        "train_batch_size_per_learner": 16,
        "num_steps_sampled_before_learning_starts": 32,
        "min_sample_timesteps_per_iteration": 64,
    },
}


@pytest.mark.parametrize("algorithm", ALGORITHMS + PRESETS)
def test_builds_and_trains_one_iteration(ray_local, algorithm):
    spec = parse_spec(
        {
            "name": f"preset-{algorithm}",
            "algorithm": algorithm,
            "env": "Pendulum-v1" if algorithm == "SAC" else "CartPole-v1",
            "config": TINY["DQN" if algorithm in PRESETS else algorithm],
            "model": {"fcnet_hiddens": [16]},
        }
    )
    validate_spec(spec)
    algo = build_config(spec).build_algo()
    try:
        result = algo.train()
    finally:
        algo.stop()
    assert result["training_iteration"] == 1
    assert result["num_env_steps_sampled_lifetime"] > 0
    learner = result.get("learners", {}).get("default_policy", {})
    losses = [v for k, v in learner.items() if "loss" in k]
    assert losses and all(math.isfinite(v) for v in losses), learner.keys()


@pytest.mark.parametrize("algorithm", ["DQN", "Rainbow_DQN"])
def test_performance_defaults_train_as_many_samples_per_step_as_rllib(ray_local, algorithm):
    """RLlib's own counters: with the performance default's 32-step sample rounds the
    trial trains train_batch_size samples per env step, as RLlib's defaults (one step, one
    update) do; tests/unit/test_update_ratio.py checks every preset by RLlib's formula."""
    from tuner.trials._algorithms import trainable_for
    from tuner.trials._tuner import trial_params

    batch = 16
    spec = parse_spec(
        {
            "name": f"ratio-{algorithm}",
            "algorithm": algorithm,
            "env": "CartPole-v1",
            "config": {
                "train_batch_size_per_learner": batch,
                "num_steps_sampled_before_learning_starts": 0,
                "min_sample_timesteps_per_iteration": 64,
            },
            "model": {"fcnet_hiddens": [16]},
        }
    )
    algo = trainable_for(spec)(config={**trial_params(spec), "seed": 0})
    try:
        assert algo.config.rollout_fragment_length % 32 in (0, 1)  # 32, 33 for n_step 3
        result = algo.train()
    finally:
        algo.stop()
    sampled = result["num_env_steps_sampled_lifetime"]
    trained = result["learners"]["__all_modules__"]["num_env_steps_trained_lifetime"]
    n_step = algo.config.n_step if isinstance(algo.config.n_step, int) else algo.config.n_step[1]
    assert sampled >= 64 and sampled % algo.config.rollout_fragment_length == 0
    assert trained / sampled == pytest.approx(batch / n_step)  # RLlib's default ratio
