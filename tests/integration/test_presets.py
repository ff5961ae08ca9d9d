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
