"""Shared fixtures: one local Ray for the in-process integration tests."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("RAY_AUTH_MODE", "token")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_DEDUP_LOGS", "0")


@pytest.fixture(scope="session")
def ray_local():
    """A 2-CPU local Ray shared by every in-process sweep of the session."""
    import ray

    from tuner.sweep import ensure_ray

    ensure_ray(num_cpus=2)
    yield ray
    ray.shutdown()


TINY_PPO = {
    "train_batch_size_per_learner": 128,
    "minibatch_size": 64,
    "num_epochs": 1,
}


# Tiny trials of each learner kind (tests of the gradient step and of actor reuse): a
# few updates an iteration on CartPole / Pendulum.
TINY_TRIALS = {
    "SAC": {
        "env": "Pendulum-v1",
        "config": {
            "train_batch_size_per_learner": 16,
            "num_steps_sampled_before_learning_starts": 32,
            "min_sample_timesteps_per_iteration": 64,
            "min_time_s_per_iteration": 0,
        },
    },
    "PPO": {
        "env": "CartPole-v1",
        "config": {"train_batch_size_per_learner": 128, "minibatch_size": 32, "num_epochs": 2},
    },
    # a clip so small that every update clips (by global norm, RLlib's default way)
    "DQN": {
        "env": "CartPole-v1",
        "config": {
            "train_batch_size_per_learner": 16,
            "num_steps_sampled_before_learning_starts": 32,
            "min_sample_timesteps_per_iteration": 64,
            "min_time_s_per_iteration": 0,
            "grad_clip": 0.01,
        },
    },
}


def tiny_spec(**patch):
    """A PPO CartPole spec that trains one iteration in about a second."""
    from tuner.spec import parse_spec

    data = {
        "name": "tiny",
        "algorithm": "PPO",
        "env": "CartPole-v1",
        "config": dict(TINY_PPO),
        "model": {"fcnet_hiddens": [16]},
        "stop": {"training_iteration": 1},
        "checkpoint": {"at_end": False},
    }
    data.update(patch)
    return parse_spec(data)
