"""A synthetic Atari-sized image env for the GPU benchmark: 84x84x4 uint8 frames.

Atari's shapes without Atari's cost (the real env is gpu_packing.py's `atari` case,
ALE/Breakout-v5 under `wrappers: atari`): the observation is a stack of four 84x84
grey frames (0-255, mostly dark background with a bright "ball" square, as after
RLlib's Atari preprocessing) and there are 4 discrete actions. The reward is 1 when
the action names the quadrant the ball is in, so the task is learnable, but the point
is throughput: frames come from a small bank built once, so a step costs next to
nothing and the CNN dominates.

RLlib 2.60's CNN encoder does not cast its input (a uint8 batch fails in conv2d:
"Input type (unsigned char) and bias type (float) should be the same"); RLlib's own
Atari preprocessing ends with `NormalizedImageEnv` (uint8 -> float32 in [-1, 1]) for
that reason. So the benchmark uses `atari_like`, ImageEnv under that same wrapper:
"bench._image_env:atari_like". Both take RLlib's env_config (a dict): `episode_len`
(default 128), `bank` (frames, default 64), `seed`.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

SHAPE = (84, 84, 4)


class ImageEnv(gym.Env):
    """84x84x4 uint8 observations, Discrete(4) actions, fixed-length episodes."""

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        config = dict(config or {})
        self.episode_len = int(config.get("episode_len", 128))
        bank = int(config.get("bank", 64))
        rng = np.random.default_rng(int(config.get("seed", 0)))
        self.observation_space = gym.spaces.Box(0, 255, SHAPE, np.uint8)
        self.action_space = gym.spaces.Discrete(4)
        # A ball (6x6, bright) moving over a dark, noisy background; frame k of the
        # stack is the ball 3 positions back, as frame stacking gives.
        path = rng.integers(0, 84 - 6, size=(bank + 3, 2))
        frames = rng.integers(0, 40, size=(bank,) + SHAPE, dtype=np.uint8)
        for i in range(bank):
            for k in range(4):
                y, x = path[i + 3 - k]
                frames[i, y : y + 6, x : x + 6, k] = 255 - 20 * k
        self._frames = frames
        y, x = path[3 : bank + 3].T + 3
        self._target = (y >= 42) * 2 + (x >= 42)  # quadrant of the newest ball
        self._i = 0
        self._t = 0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self._i = int(self.np_random.integers(len(self._frames)))
        self._t = 0
        return self._frames[self._i], {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        reward = float(int(action) == int(self._target[self._i]))
        self._i = (self._i + 1) % len(self._frames)
        self._t += 1
        return self._frames[self._i], reward, False, self._t >= self.episode_len, {}


def atari_like(config: dict[str, Any] | None = None) -> gym.Env:
    """ImageEnv as RLlib's Atari preprocessing hands frames to the CNN: float32 in [-1, 1]."""
    from ray.rllib.env.wrappers.atari_wrappers import NormalizedImageEnv

    return NormalizedImageEnv(ImageEnv(config))
