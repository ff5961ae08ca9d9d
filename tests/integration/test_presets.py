"""Every algorithm and preset builds from a spec and trains one real iteration."""

from __future__ import annotations

import math

import pytest

from tuner.rllib import build_config
from tuner.spec import ALGORITHMS, PRESETS, parse_spec
from tuner.validation import validate_spec

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
    assert losses, learner.keys()
    assert all(math.isfinite(v) for v in losses), learner.keys()


@pytest.mark.parametrize("envs", [None, 1], ids=["flat-defaults", "one-env"])
@pytest.mark.parametrize("algorithm", ["DQN", "Rainbow_DQN"])
def test_performance_defaults_train_as_many_samples_per_step_as_rllib(ray_local, algorithm, envs):
    """RLlib's own counters: with the performance defaults' sample rounds (8 vectorised
    envs x 4 steps where the spec sets no env count, else 32 steps of one env) the trial
    trains train_batch_size samples per n_step env steps, as RLlib's defaults for one env
    (one step, one update) do, counted from the env steps really sampled (a vector round
    can overshoot); tests/unit/test_update_ratio.py checks every preset by RLlib's formula."""
    from tuner.rllib import trainable_for
    from tuner.sweep import trial_params

    batch = 16
    spec = parse_spec(
        {
            "name": f"ratio-{algorithm}",
            "algorithm": algorithm,
            "env": "CartPole-v1",
            "config": {
                "train_batch_size_per_learner": batch,
                "num_steps_sampled_before_learning_starts": 0,
                "min_sample_timesteps_per_iteration": 200,
            },
            "model": {"fcnet_hiddens": [16]},
            "resources": {"num_envs_per_env_runner": envs},
        }
    )
    algo = trainable_for(spec)(config={**trial_params(spec), "seed": 0})
    try:
        config = algo.config
        per_round = config.rollout_fragment_length * config.num_envs_per_env_runner
        assert config.num_envs_per_env_runner == (8 if envs is None else 1)
        assert per_round >= 24
        assert algo._replay_path == "flat"
        result = algo.train()
    finally:
        algo.stop()
    sampled = result["num_env_steps_sampled_lifetime"]
    trained = result["learners"]["__all_modules__"]["num_env_steps_trained_lifetime"]
    n_step = config.n_step if isinstance(config.n_step, int) else config.n_step[1]
    assert sampled >= 200
    assert trained == batch * (sampled // n_step)  # RLlib's default ratio, one env


def test_ppo_vectorised_defaults_sample_the_specs_batch_and_evaluate_on_its_envs(ray_local):
    """RLlib's own counters: a PPO trial given the vectorised default (the spec sets no
    env count) steps 8 envs side by side (256 steps each of a 2,048 batch) and still
    samples one train batch per iteration (up to 7 steps over: a sub-env that resets in a
    vector step samples nothing), trains it for the spec's epochs, and evaluates on the
    spec's own single env."""
    from tuner.rllib import trainable_for
    from tuner.sweep import trial_params

    batch, epochs, minibatch = 2048, 2, 512
    spec = parse_spec(
        {
            "name": "ppo-vectorised",
            "algorithm": "PPO",
            "env": "CartPole-v1",
            "config": {
                "train_batch_size_per_learner": batch,
                "minibatch_size": minibatch,
                "num_epochs": epochs,
            },
            "model": {"fcnet_hiddens": [16]},
            "evaluation": {"interval": 1, "duration": 2},
        }
    )
    algo = trainable_for(spec)(config={**trial_params(spec), "seed": 0})
    try:
        assert algo.env_runner.num_envs == 8
        assert algo.eval_env_runner.num_envs == 1
        results = [algo.train() for _ in range(2)]
    finally:
        algo.stop()
    for result in results:
        assert batch <= result["env_runners"]["num_env_steps_sampled"] < batch + 8
    # the first iteration's learner counters (RLlib smooths the connector's over iterations)
    sampled = results[0]["env_runners"]["num_env_steps_sampled"]
    learner = results[0]["learners"]["__all_modules__"]
    assert learner["learner_connector_sum_episodes_length_in"] == sampled  # all of it
    # the spec's epochs over every row (the batch and one bootstrap row per episode chunk),
    # in whole minibatches (RLlib's cyclic iterator)
    rows_out = learner["learner_connector_sum_episodes_length_out"]
    assert abs(learner["num_module_steps_trained"] - epochs * rows_out) < minibatch
    assert results[-1]["evaluation"]["env_runners"]["num_episodes"] >= 2
