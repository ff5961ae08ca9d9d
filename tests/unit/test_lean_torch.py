"""torch's deterministic mode without its fill of new tensors (tuner/rllib/_lean_torch.py):
a seeded Learner makes the very same updates with the fill on and off, and the
deterministic algorithms RLlib turned on stay on."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
import torch.utils.deterministic as deterministic
from ray.rllib.policy.sample_batch import MultiAgentBatch, SampleBatch

from tuner.rllib import build_config
from tuner.rllib._lean_torch import skip_uninitialized_fill
from tuner.spec import parse_spec


@pytest.fixture
def restore_torch_flags(monkeypatch):
    """torch's two global flags as they were, after the test."""
    monkeypatch.setattr(deterministic, "fill_uninitialized_memory", True)
    was = torch.are_deterministic_algorithms_enabled()
    yield
    torch.use_deterministic_algorithms(was)


def _batch(step: int, n: int = 32) -> MultiAgentBatch:
    rng = np.random.default_rng(step)
    columns = {
        "obs": rng.normal(size=(n, 4)).astype(np.float32),
        "new_obs": rng.normal(size=(n, 4)).astype(np.float32),
        "actions": rng.integers(0, 2, size=n),
        "rewards": rng.normal(size=n).astype(np.float32),
        "terminateds": rng.random(n) < 0.1,
        "truncateds": np.zeros(n, dtype=bool),
        "n_step": np.ones(n, dtype=np.int64),
        "weights": np.ones(n, dtype=np.float32),
    }
    return MultiAgentBatch({"default_policy": SampleBatch(columns)}, env_steps=n)


def _weights_after_updates(fill: bool) -> list[torch.Tensor]:
    """A seeded DQN Learner's weights, deterministic algorithms on, after 3 updates;
    each update moved them."""
    spec = parse_spec(
        {"name": "fill", "algorithm": "DQN", "env": "CartPole-v1", "config": {"seed": 7}}
    )
    config = build_config(spec).learners(num_learners=0)
    config = config.rl_module(model_config={"fcnet_hiddens": [16]})
    learner = config.build_learner(env=gym.make("CartPole-v1"))
    # as RLlib's seeding leaves a CPU-only torch (a CUDA build: not by RLlib)
    torch.use_deterministic_algorithms(True)
    deterministic.fill_uninitialized_memory = fill
    params = list(learner.module["default_policy"].parameters())
    for step in range(3):
        before = [p.detach().clone() for p in params]
        learner.update(batch=_batch(step), timesteps={"num_env_steps_sampled_lifetime": step})
        assert any(not torch.equal(b, p) for b, p in zip(before, params, strict=True))
    return [p.detach().clone() for p in params]


def test_a_seeded_learner_updates_the_same_without_the_fill(restore_torch_flags):
    with_fill = _weights_after_updates(fill=True)
    without = _weights_after_updates(fill=False)
    assert len(with_fill) == len(without)
    for a, b in zip(with_fill, without, strict=True):
        assert torch.equal(a, b)


def test_the_switch_turns_only_the_fill_off(restore_torch_flags):
    torch.use_deterministic_algorithms(True)
    assert skip_uninitialized_fill(object()) is True
    assert deterministic.fill_uninitialized_memory is False
    assert torch.are_deterministic_algorithms_enabled()
    assert skip_uninitialized_fill() is False  # already off
