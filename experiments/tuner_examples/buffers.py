"""A replay buffer of your own for DQN: `config.replay_buffer_config.type` by import path
(experiments/own-buffer-dqn.yaml)."""

from __future__ import annotations

from typing import Any

from ray.rllib.utils.replay_buffers.episode_replay_buffer import EpisodeReplayBuffer


class CountingReplayBuffer(EpisodeReplayBuffer):
    """RLlib's EpisodeReplayBuffer that also reports how many episode chunks it was given,
    as the result key `replay_buffer/own_buffer_chunks_added` (summed over the trial)."""

    def add(self, episodes: Any) -> None:
        chunks = episodes if isinstance(episodes, list) else [episodes]
        super().add(episodes)
        self.metrics.log_value("own_buffer_chunks_added", len(chunks), reduce="sum")
