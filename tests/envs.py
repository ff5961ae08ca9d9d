"""Small environments for tests, importable as 'tests.envs:Name' by trial workers."""

from __future__ import annotations

import gymnasium as gym
import numpy as np


class LineEnv(gym.Env):
    """Episodes of exactly `length` steps paying `reward` per step (NaN if nan_reward)."""

    def __init__(self, env_config: dict | None = None) -> None:
        cfg = dict(env_config or {})
        self.length = int(cfg.get("length", 10))
        if self.length < 1:
            raise ValueError(f"length must be >= 1, got {self.length}")
        self.reward = float("nan") if cfg.get("nan_reward") else float(cfg.get("reward", 1.0))
        self.observation_space = gym.spaces.Box(0.0, 1.0, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.t = 0

    def _obs(self) -> np.ndarray:
        return np.array([self.t / self.length, 1.0], np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        return self._obs(), self.reward, self.t >= self.length, False, {}


def make_line_env(env_config: dict) -> LineEnv:
    """A factory (not a class) taking env_config."""
    return LineEnv({**env_config, "length": env_config.get("length", 10)})


def make_multi_cartpole(env_config: dict):
    """A factory returning an RLlib MultiAgentEnv (as one wrapping a PettingZoo env in
    RLlib's PettingZooEnv would)."""
    from tuner_examples.multiagent import MultiCartPole

    return MultiCartPole(env_config)
