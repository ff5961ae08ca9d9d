"""`tuner evaluate`'s episodes played side by side, one batched forward pass a step: each
episode is the one it would be alone (its seed, its length, its return, its cut at
max_steps), and every forward pass sees the whole batch. Real CartPole envs; the policy
is a fixed rule over one observation column, so its action for a row depends on that
row only and episodes played alone give the reference."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch

from tuner.rllib._evaluate import _single_agent_episodes


class PoleRule:
    """A deterministic policy: push the cart towards the pole's lean (CartPole's third
    column), as an RLModule's forward_inference gives actions; records batch sizes."""

    def __init__(self) -> None:
        self.batch_sizes: list[int] = []

    def forward_inference(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The actions for a batch of observations.

        Args:
            batch: {"obs": rows}.

        Returns:
            {"actions": one per row}.
        """
        self.batch_sizes.append(len(batch["obs"]))
        return {"actions": (batch["obs"][:, 2] > 0).long()}


def _alone(seed: int, max_steps: int) -> tuple[float, int]:
    """One episode played by itself, one env step per policy call."""
    env = gym.make("CartPole-v1")
    obs, _ = env.reset(seed=seed)
    total, steps, done = 0.0, 0, False
    while not done and steps < max_steps:
        obs, reward, terminated, truncated, _ = env.step(int(obs[2] > 0))
        total += float(reward)
        steps += 1
        done = terminated or truncated
    env.close()
    return total, steps


def _side_by_side(
    seeds: list[int], max_steps: int = 100_000, rule: PoleRule | None = None, **kwargs: Any
) -> list[tuple[float, int]]:
    """The rule's CartPole episodes on `seeds`, played side by side."""
    return _single_agent_episodes(
        lambda i: gym.make("CartPole-v1"), rule or PoleRule(), seeds, max_steps, None, **kwargs
    )


def test_each_episode_is_the_one_it_would_be_alone():
    """Side by side, episode i (seed 3 + i) has the return and length it has alone."""
    seeds = [3, 4, 5, 6, 7]
    assert _side_by_side(seeds) == [_alone(s, 100_000) for s in seeds]


def test_the_episodes_end_at_different_steps():
    """The rule's episodes on these seeds end at different lengths (so the test above
    covers episodes that end while others go on)."""
    played = _side_by_side([3, 4, 5, 6, 7])
    assert len({steps for _, steps in played}) > 1


def test_max_steps_cuts_every_episode():
    """No episode runs past max_steps, and each cut one equals its cut alone."""
    played = _side_by_side([3, 4], 20)
    assert played == [_alone(3, 20), _alone(4, 20)] == [(20.0, 20), (20.0, 20)]


def test_every_forward_pass_sees_the_whole_batch():
    """The batch keeps one row per episode to the end, ended episodes included."""
    rule = PoleRule()
    played = _side_by_side([3, 4, 5], rule=rule)
    assert set(rule.batch_sizes) == {3}
    assert len(rule.batch_sizes) == max(steps for _, steps in played)


def test_observations_pass_through_the_filter():
    """What the policy sees is the filter's output (normalize_observations' statistics)."""
    flipped = _side_by_side([3], seen=lambda agent, obs: -np.asarray(obs))
    assert flipped[0][1] < _alone(3, 100_000)[1]
