"""Envs for the examples: a partially observed CartPole for recurrent models."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np


class NoVelocityObservation(gym.ObservationWrapper):
    """Keeps CartPole's cart position and pole angle, drops both velocities: the policy
    must infer them from the history of observations (an LSTM can; an MLP cannot)."""

    KEEP = (0, 2)

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        low, high = env.observation_space.low, env.observation_space.high
        self.observation_space = gym.spaces.Box(
            low[list(self.KEEP)], high[list(self.KEEP)], dtype=np.float32
        )

    def observation(self, observation: np.ndarray) -> np.ndarray:
        return observation[list(self.KEEP)].astype(np.float32)


def stateless_cartpole(env_config: dict[str, Any]) -> gym.Env:
    """CartPole-v1 without velocities (env_config: gym.make kwargs, e.g. max_episode_steps)."""
    return NoVelocityObservation(gym.make("CartPole-v1", **dict(env_config)))
