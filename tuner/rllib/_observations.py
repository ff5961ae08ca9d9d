"""Observation normalization, `normalize_observations: true` in a spec: RLlib's
MeanStdFilter env-to-module connector (a running mean and std per observation element,
clipped to +-10), as stable-baselines3's VecNormalize does for rl-zoo3's `normalize:
true`. Its statistics are part of the env runner's state, so RLlib keeps them in every
checkpoint; `tuner evaluate` reads them back (filter_from_checkpoint) and normalizes
each observation as the trial's policy saw it, without updating the statistics."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

# where an algorithm checkpoint keeps its env runner's connector states
ENV_RUNNER_DIR = "env_runner"
ENV_TO_MODULE = "env_to_module_connector"
FILTER = "MeanStdFilter"


def mean_std_connector(env: Any = None, spaces: Any = None, device: Any = None) -> Any:
    """The env-to-module connector a trial with `normalize_observations` runs (RLlib's
    `env_to_module_connector` callable: env, spaces, device)."""
    from ray.rllib.connectors.env_to_module.mean_std_filter import MeanStdFilter

    return MeanStdFilter(multi_agent=False)


def mean_std_connector_multi_agent(env: Any = None, spaces: Any = None, device: Any = None) -> Any:
    """mean_std_connector for a multi-agent trial (one filter per agent)."""
    from ray.rllib.connectors.env_to_module.mean_std_filter import MeanStdFilter

    return MeanStdFilter(multi_agent=True)


def filter_state(checkpoint: str | Path) -> dict[Any, Any] | None:
    """The MeanStdFilter state an algorithm checkpoint's env runner kept ({agent id:
    running statistics}, as RLlib's Checkpointable wrote it: pickle, or msgpack), or
    None where it ran without one."""
    import pickle

    from ray.rllib.utils.checkpoints import Checkpointable

    base = (
        Path(checkpoint) / ENV_RUNNER_DIR / ENV_TO_MODULE / FILTER / Checkpointable.STATE_FILE_NAME
    )
    if base.with_suffix(".msgpack").is_file():
        import msgpack

        with base.with_suffix(".msgpack").open("rb") as f:
            return dict(msgpack.load(f, strict_map_key=False))
    if not base.with_suffix(".pkl").is_file():
        return None
    with base.with_suffix(".pkl").open("rb") as f:
        return dict(pickle.load(f))  # written by the trial's own env runner


def filter_from_checkpoint(checkpoint: str | Path) -> Callable[[Any, Any], Any] | None:
    """A function (agent id, observation) -> the observation as the trial's policy saw
    it, normalized by the checkpoint's statistics (which it leaves as they are; RLlib's
    own formula), or None where the checkpoint ran without normalization."""
    state = filter_state(checkpoint)
    if not state:
        return None
    import tree
    from ray.rllib.utils.filter import MeanStdFilter as Filter
    from ray.rllib.utils.filter import RunningStat

    filters: dict[Any, Any] = {}
    for agent, kept in state.items():
        one = Filter(kept["shape"], kept["de_mean_to_zero"], kept["de_std_to_one"])
        one.clip = kept["clip_by_value"]
        stats = [RunningStat.from_state(s) for s in kept["running_stats"]]
        one.running_stats = tree.unflatten_as(one.shape, stats)
        filters[agent] = one

    def normalize(agent: Any, obs: Any) -> Any:
        one = filters.get(agent) or filters.get(None) or next(iter(filters.values()))
        return one(np.asarray(obs, dtype=np.float32), update=False)

    return normalize
