"""Training loops of your own (experiments/reinforce-cartpole.yaml): REINFORCE with a
linear softmax policy, written by hand in numpy, in the three forms a spec's
`algorithm: "package.module:name"` takes.

Each gets the spec's `config` (sampled values laid in) with `seed`, and `env` /
`env_config` when the spec names an env. Settings: lr, gamma, episodes_per_iteration.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from ray import tune


class Reinforce:
    """The learner: a linear softmax policy over the observation, trained by REINFORCE
    with the mean return as baseline."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.env = gym.make(config.get("env") or "CartPole-v1", **config.get("env_config", {}))
        self.rng = np.random.default_rng(int(config.get("seed", 0)))
        obs_dim = self.env.observation_space.shape[0]
        self.weights = np.zeros((obs_dim, self.env.action_space.n))
        self.lr = float(config.get("lr", 0.01))
        self.gamma = float(config.get("gamma", 0.99))
        self.episodes = int(config.get("episodes_per_iteration", 10))
        self.seed = int(config.get("seed", 0))
        self.episodes_done = 0

    def _episode(self) -> tuple[list[np.ndarray], list[int], list[float]]:
        obs, _ = self.env.reset(seed=self.seed + self.episodes_done)
        observations, actions, rewards = [], [], []
        done = False
        while not done:
            logits = obs @ self.weights
            p = np.exp(logits - logits.max())
            p /= p.sum()
            action = int(self.rng.choice(len(p), p=p))
            observations.append(obs)
            actions.append(action)
            obs, reward, terminated, truncated, _ = self.env.step(action)
            rewards.append(float(reward))
            done = terminated or truncated
        self.episodes_done += 1
        return observations, actions, rewards

    def iteration(self) -> dict[str, float]:
        """Runs `episodes_per_iteration` episodes and one policy-gradient step."""
        grad = np.zeros_like(self.weights)
        returns, losses = [], []
        batch = [self._episode() for _ in range(self.episodes)]
        baseline = np.mean([sum(r) for _, _, r in batch])
        for observations, actions, rewards in batch:
            g, discounted = 0.0, []
            for r in reversed(rewards):
                g = r + self.gamma * g
                discounted.append(g)
            discounted.reverse()
            returns.append(sum(rewards))
            for obs, action, ret in zip(observations, actions, discounted, strict=True):
                logits = obs @ self.weights
                p = np.exp(logits - logits.max())
                p /= p.sum()
                onehot = np.eye(len(p))[action]
                advantage = ret - baseline
                grad += np.outer(obs, onehot - p) * advantage
                losses.append(-np.log(p[action] + 1e-8) * advantage)
        self.weights += self.lr * grad / self.episodes
        return {
            "episode_return_mean": float(np.mean(returns)),
            "loss": float(np.mean(losses)),
            "episodes_total": float(self.episodes_done),
        }


def reinforce(config: dict[str, Any]) -> Iterator[dict[str, float]]:
    """A generator: yields each iteration's metrics (tuner reports them to Tune)."""
    learner = Reinforce(config)
    while True:
        yield learner.iteration()


def reinforce_reporting(config: dict[str, Any]) -> None:
    """A Tune function trainable: reports each iteration itself."""
    learner = Reinforce(config)
    while True:
        tune.report(learner.iteration())


class ReinforceTrainable(tune.Trainable):
    """A Tune Trainable: can save and restore, so sweeps checkpoint and resume it."""

    def setup(self, config: dict[str, Any]) -> None:
        self.learner = Reinforce(config)

    def step(self) -> dict[str, float]:
        return self.learner.iteration()

    def save_checkpoint(self, checkpoint_dir: str) -> None:
        np.save(Path(checkpoint_dir, "weights.npy"), self.learner.weights)
        Path(checkpoint_dir, "state.json").write_text(
            json.dumps({"episodes_done": self.learner.episodes_done})
        )

    def load_checkpoint(self, checkpoint_dir: str) -> None:
        self.learner.weights = np.load(Path(checkpoint_dir, "weights.npy"))
        state = json.loads(Path(checkpoint_dir, "state.json").read_text())
        self.learner.episodes_done = int(state["episodes_done"])
