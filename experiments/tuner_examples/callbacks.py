"""RLlib callbacks that log their own metrics (experiments/callbacks-cartpole.yaml)."""

from __future__ import annotations

from typing import Any

import numpy as np
from ray.rllib.callbacks.callbacks import RLlibCallback


class PoleAngleMax(RLlibCallback):
    """Logs the largest pole angle (radians) each CartPole episode reached, as the
    result key `env_runners/pole_angle_max` (the mean over the iteration's episodes)."""

    def on_episode_end(self, *, episode: Any, metrics_logger: Any = None, **kwargs: Any) -> None:
        observations = np.asarray(episode.get_observations())
        angle = float(np.abs(observations[:, 2]).max())
        metrics_logger.log_value("pole_angle_max", angle, reduce="mean")


class EpisodeCount(RLlibCallback):
    """Logs how many episodes each iteration finished (`env_runners/episodes_ended`)."""

    def on_episode_end(self, *, metrics_logger: Any = None, **kwargs: Any) -> None:
        metrics_logger.log_value("episodes_ended", 1, reduce="sum")
