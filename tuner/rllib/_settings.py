"""The settings a spec's trials start from: the algorithm's performance defaults (which
apply, as far as the spec tells), the preset's settings over them and the spec's own
`config` over both; RLlib's own default config of each algorithm and the keys it knows."""

from __future__ import annotations

import copy
import logging
import os
from functools import cache
from typing import Any

from ray.rllib.algorithms.algorithm_config import AlgorithmConfig
from ray.rllib.algorithms.appo import APPOConfig
from ray.rllib.algorithms.dqn import DQNConfig
from ray.rllib.algorithms.impala import IMPALAConfig
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.algorithms.sac import SACConfig

from tuner import algorithms as registry
from tuner.rllib import _fast_replay
from tuner.rllib._sac_model import TunerSACConfig
from tuner.spec import ExperimentSpec, import_paths

_ENVS = "num_envs_per_env_runner"


class _NewApiStackNotice(logging.Filter):
    """Drops RLlib's "You are running X on the new API stack!" notice: every trial of
    ours runs on the new stack, and it printed on every validate, plan and run. RLlib
    2.60 logs it from AlgorithmConfig's module and, for SAC, from SAC's."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "on the new API stack!" not in record.getMessage()


for _config in (AlgorithmConfig, SACConfig):
    logging.getLogger(_config.__module__).addFilter(_NewApiStackNotice())
# RLlib's default config of each base algorithm (SAC's with our Q-network catalog): the
# values a trial's config dict starts from
_DEFAULT_CONFIGS = {
    "PPO": PPOConfig,
    "APPO": APPOConfig,
    "IMPALA": IMPALAConfig,
    "DQN": DQNConfig,
    "SAC": TunerSACConfig,
}


def default_config(algorithm: str) -> AlgorithmConfig:
    """A fresh RLlib default config of an algorithm or preset's base algorithm.

    Args:
        algorithm: An algorithm's or a preset's name.

    Returns:
        The config.
    """
    return _DEFAULT_CONFIGS[registry.base_algorithm(algorithm)]()


# The Nature DQN CNN (Mnih et al. 2015) over 84x84x4 frames: the model of `wrappers: atari`
# when the spec names no model.conv_filters ([filters, [kernel], stride] per layer).
ATARI_CONV_FILTERS = [[32, [8, 8], 4], [64, [4, 4], 2], [64, [3, 3], 1]]


def _chosen(spec: ExperimentSpec) -> set[str]:
    """The top-level settings the spec itself picks: its preset, `config`, search space."""
    entry = registry.get(spec.algorithm)
    space = {key.split(".", 1)[0] for key in spec.search.space or {}}
    return set(entry.preset_config) | set(spec.config) | space


# RLlib's two single-agent episode buffers, the ones the flat replay path replays as
_FLAT_BUFFERS = {"EpisodeReplayBuffer", "PrioritizedEpisodeReplayBuffer"}


# settings that keep a trial off the flat path (or may: _fast_replay.eligible)
_CONNECTORS = {"env_to_module_connector", "module_to_env_connector"}


_FLAT_BLOCKERS = {
    "store_buffer_in_checkpoints",
    "count_steps_by",
    "add_default_connectors_to_learner_pipeline",
    "learner_connector",
}


def _vectorisable(spec: ExperimentSpec) -> bool:
    """Whether, as far as the spec tells, its trials can run more envs per env runner than
    it asks for and change nothing else: it sets neither `rollout_fragment_length`,
    `batch_mode` nor `resources.num_envs_per_env_runner`; single-agent, no wrappers, no
    own module, connectors or env_config, no LSTM, nothing of these searched; a gymnasium
    env whose spaces the flat path takes (flat Box observations, Box or Discrete actions).
    The same answer in the API, the driver and the trial."""
    if spec.custom_algorithm or spec.resources.num_envs_per_env_runner is not None:
        return False
    chosen = _chosen(spec)
    if chosen & {"rollout_fragment_length", "batch_mode", *_CONNECTORS}:
        return False
    if spec.multi_agent is not None or spec.wrappers or spec.module or spec.env_config:
        return False
    if spec.model.get("use_lstm"):
        return False
    if any(key.startswith(("env_config.", "model.use_lstm")) for key in spec.search.space or {}):
        return False
    return _fast_replay.gym_env_fits(spec.env)


def flat_defaults_apply(spec: ExperimentSpec) -> bool:
    """Whether the spec's trials run with the algorithm's flat_replay_defaults.

    Those (DQN: vectorised envs) instead of its performance_defaults: they have some, the
    trials can take more envs (_vectorisable) and, as far as the spec tells, take the flat
    replay path (_fast_replay.eligible: one of RLlib's two episode buffers, nothing that
    keeps a trial off it, TUNER_FAST_REPLAY on). The same answer in the API, the driver
    and the trial.

    Args:
        spec: The sweep's spec.

    Returns:
        True where they apply.
    """
    if spec.custom_algorithm or not registry.get(spec.algorithm).flat_replay_defaults:
        return False
    if not _vectorisable(spec) or _chosen(spec) & _FLAT_BLOCKERS:
        return False
    if spec.observations_normalized:  # a connector of its own: RLlib's replay path
        return False
    if os.environ.get(_fast_replay.SWITCH, "1") == "0":
        return False
    if any(key.startswith("replay_buffer_config") for key in spec.search.space or {}):
        return False
    entry = registry.get(spec.algorithm)
    buffer = deep_merge(entry.preset_config, spec.config).get("replay_buffer_config") or {}
    return buffer.get("type", "PrioritizedEpisodeReplayBuffer") in _FLAT_BUFFERS


def vector_defaults_apply(spec: ExperimentSpec) -> bool:
    """Whether the spec's trials run with the env count of the performance_defaults.

    The algorithm's performance_defaults (PPO: vectorised envs, the same train batch,
    minibatches and epochs): it has one and the trials can take it (_vectorisable).

    Args:
        spec: The sweep's spec.

    Returns:
        True where they apply.
    """
    if spec.custom_algorithm or _ENVS not in registry.get(spec.algorithm).performance_defaults:
        return False
    return _vectorisable(spec)


def _performance_defaults(spec: ExperimentSpec) -> dict[str, Any]:
    """The performance defaults in force, as config settings (their env count goes to
    the env runners: num_envs_of)."""
    entry = registry.get(spec.algorithm)
    chosen = entry.flat_replay_defaults if flat_defaults_apply(spec) else entry.performance_defaults
    return {k: v for k, v in chosen.items() if k != _ENVS}


def preset_warnings(algorithm: str) -> list[str]:
    """Warnings a preset carries (settings RLlib accepts but ignores).

    Args:
        algorithm: An algorithm's or a preset's name.

    Returns:
        The warnings; [] for an algorithm.
    """
    if ":" in algorithm:
        return []
    return list(registry.get(algorithm).warnings)


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """A copy of `base` with `override` merged in (override wins, dicts merge)."""
    out = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


@cache
def rllib_keys(base_algorithm: str) -> frozenset[str]:
    """Config names RLlib knows for an algorithm (its `to_dict()` keys).

    Args:
        base_algorithm: An RLlib algorithm's name.

    Returns:
        The names.
    """
    cfg = default_config(base_algorithm)
    return frozenset(k for k in cfg.to_dict() if not k.startswith("_")) | {
        "model_config",
        "train_batch_size_per_learner",
    }


def fixed_settings(spec: ExperimentSpec) -> dict[str, Any]:
    """The settings a spec fixes, over the algorithm's defaults.

    The algorithm's performance defaults, the preset's settings over them, and the
    spec's own `config` over both (the registry: tuner/algorithms). With `wrappers:
    atari` and no conv_filters in the spec's `model` (or its config's model_config), the
    model_config gets the Atari CNN (ATARI_CONV_FILTERS), so it is reported and logged
    with the rest.

    Args:
        spec: The sweep's spec.

    Returns:
        The settings, by RLlib's names.
    """
    if spec.custom_algorithm:
        return copy.deepcopy(spec.config)
    entry = registry.get(spec.algorithm)
    fixed = deep_merge(deep_merge(_performance_defaults(spec), entry.preset_config), spec.config)
    if spec.wrappers == "atari" and "conv_filters" not in spec.model:
        model = dict(fixed.get("model_config") or {})
        if "conv_filters" not in model:
            fixed["model_config"] = {**model, "conv_filters": copy.deepcopy(ATARI_CONV_FILTERS)}
    return fixed


def code_settings(spec: ExperimentSpec) -> dict[str, Any]:
    """The fixed settings (fixed_settings) that name code by import path.

    At a code position, whole top-level entries (`replay_buffer_config` with its `type`).
    build_config leaves them out: RLlib's update_from_dict would import such strings
    itself (in the API's validator too, and wrongly: "pkg.mod:Name" as the attribute
    "mod:Name" of module "pkg"). trial_params lays them into the trial's config, and the
    trial imports them (with_user_code).

    Args:
        spec: The sweep's spec.

    Returns:
        Those settings, by RLlib's names.
    """
    if spec.custom_algorithm:
        return {}
    return {k: v for k, v in fixed_settings(spec).items() if import_paths({k: v})}
