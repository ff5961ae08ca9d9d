"""RLlib algorithms and presets: from a spec to an AlgorithmConfig and a trainable.

The trainables are thin subclasses of RLlib's algorithms that add what a sweep
needs and RLlib does not do by itself: a per-trial seed derived from the spec
seed and the trial's index, a NaN-loss check that turns a diverged trial into an
errored one, and where the trial ran (node, device) in every result.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import logging
import math
import os
from functools import cache
from pathlib import Path
from typing import Any

from ray.rllib.algorithms.algorithm import Algorithm
from ray.rllib.algorithms.algorithm_config import AlgorithmConfig
from ray.rllib.algorithms.appo import APPO
from ray.rllib.algorithms.dqn import DQN
from ray.rllib.algorithms.impala import IMPALA
from ray.rllib.algorithms.ppo import PPO
from ray.rllib.algorithms.sac import SAC
from ray.tune.result import TRIAL_INFO

from tuner import algorithms as registry
from tuner._code_refs import import_paths, resolve_paths
from tuner.mlflow_names import LEARNERS_PREFIX, STAGE_CONFIRM, STAGE_SEARCH
from tuner.spec import ExperimentSpec, MultiAgentSpec
from tuner.trials import _fast_replay
from tuner.trials._envs import env_config_for, split_env_name
from tuner.trials._envs import env_name as _env_name
from tuner.trials._sac_model import TunerSACConfig

logger = logging.getLogger(__name__)

CHECKPOINT_META = "tuner.json"  # env and algorithm of a checkpoint, for `tuner evaluate`
MODEL_PREFIX = "model."
ENV_CONFIG_PREFIX = "env_config."
MODEL_CONFIG_KEY = "_model_config"  # where AlgorithmConfig.to_dict() keeps model_config
# The Nature DQN CNN (Mnih et al. 2015) over 84x84x4 frames: the model of `wrappers: atari`
# when the spec names no model.conv_filters ([filters, [kernel], stride] per layer).
ATARI_CONV_FILTERS = [[32, [8, 8], 4], [64, [4, 4], 2], [64, [3, 3], 1]]
# A confirmation trial's config carries the values and seed it re-runs under this key;
# the trial applies them before RLlib sees its config.
CONFIRM_KEY = "_tuner_confirm"
# The spec's own code by import path (callbacks, module, and the paths its RLlib settings
# name at code positions): the trial imports it, so the driver's config stays plain data
# and the API process never imports user code.
CODE_KEY = "_tuner_code"
# Set when a performance default's rollout_fragment_length is in force and nothing in the
# spec sets the update ratio: the trial then holds RLlib's default ratio (hold_update_ratio).
HOLD_RATIO_KEY = "_tuner_hold_update_ratio"
# Set when the algorithm's flat_replay_defaults are in force (flat_defaults_apply): the
# trial must then take the flat replay path, which counts its updates exactly.
FLAT_DEFAULTS_KEY = "_tuner_flat_defaults"
# Set when a performance default's env count is in force for on-policy sampling
# (vector_defaults_apply): the most envs; the trial takes fewer where its train batch is
# small (vector_envs), so each env samples at least MIN_STEPS_PER_ENV steps of a batch.
VECTOR_ENVS_KEY = "_tuner_vector_envs"
MIN_STEPS_PER_ENV = 256
_RATIO_KEYS = ("rollout_fragment_length", "training_intensity")
_ENVS = "num_envs_per_env_runner"


def config_path(key: str, config: dict[str, Any]) -> tuple[str, ...]:
    """Where a search-space key lives in a config dict (AlgorithmConfig.to_dict()): its
    own name, or the private name RLlib keeps a property under
    (`train_batch_size_per_learner` -> `_train_batch_size_per_learner`), so the value
    laid there is the one RLlib builds its config from and the one reported."""
    if key.startswith(MODEL_PREFIX):
        return (MODEL_CONFIG_KEY, key[len(MODEL_PREFIX) :])
    if key.startswith(ENV_CONFIG_PREFIX):
        return ("env_config", key[len(ENV_CONFIG_PREFIX) :])
    if key not in config and f"_{key}" in config:
        return (f"_{key}",)
    return (key,)


def sampled_values(trial_config: dict[str, Any], space_keys: list[str]) -> dict[str, Any]:
    """The values a trial ran with for each search-space key, read where RLlib keeps
    them (a confirmation trial: the values it re-runs)."""
    confirm = trial_config.get(CONFIRM_KEY)
    if isinstance(confirm, dict):
        return {key: confirm["values"].get(key) for key in space_keys}
    out = {}
    for key in space_keys:
        node: Any = trial_config
        for part in config_path(key, trial_config):
            node = node.get(part) if isinstance(node, dict) else None
        out[key] = node
    return out


def apply_values(config: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """A copy of a config dict with search-space values set where RLlib keeps them
    (dicts along each path are copied; the rest is shared)."""
    out = dict(config)
    for key, value in values.items():
        path = config_path(key, out)
        node = out
        for part in path[:-1]:
            node[part] = dict(node.get(part) or {})
            node = node[part]
        node[path[-1]] = copy.deepcopy(value)
    return out


def seed_of(trial_config: dict[str, Any], trial_id: str, base_seed: int) -> int:
    """The seed a trial runs with: a confirmation trial's own, else spec seed + index."""
    confirm = trial_config.get(CONFIRM_KEY)
    if isinstance(confirm, dict):
        return int(confirm["seed"])
    return trial_seed(base_seed, trial_index(trial_id))


def stage_of(trial_config: dict[str, Any]) -> str:
    """search, or confirm for a confirmation trial."""
    return STAGE_CONFIRM if isinstance(trial_config.get(CONFIRM_KEY), dict) else STAGE_SEARCH


def trial_seed(base_seed: int, trial_index: int) -> int:
    """The seed of trial `trial_index` (0-based) of a sweep whose spec seed is `base_seed`."""
    return (base_seed + trial_index) % (2**31)


def trial_index(trial_id: str) -> int:
    """A trial's index for its seed. Tune's own variant generator ends a trial id in its
    0-based creation index ('a1b2c_00003' -> 3). Searchers (optuna) give a random hex id
    with no index: those get a stable number from the id, far above any grid index, so
    every trial of a sweep still runs with its own seed."""
    _, sep, tail = trial_id.rpartition("_")
    if sep and tail.isdigit():
        return int(tail)
    digest = hashlib.sha1(trial_id.encode()).hexdigest()
    return 1_000_000 + int(digest[:8], 16) % 1_000_000_000


def _learner_device(config: AlgorithmConfig) -> str:
    if config.num_gpus_per_learner and config.num_learners == 0:
        import ray

        gpu_ids = ray.get_gpu_ids()
        return f"cuda:{gpu_ids[0]}" if gpu_ids else "cuda:0"
    if config.num_gpus_per_learner:
        return "cuda (remote learners)"
    return "cpu"


def _nan_losses(result: dict[str, Any]) -> list[str]:
    bad = []
    for module_id, stats in (result.get("learners") or {}).items():
        if not isinstance(stats, dict):
            continue
        for key, value in stats.items():
            if "loss" in key and isinstance(value, int | float) and not math.isfinite(value):
                bad.append(f"{LEARNERS_PREFIX}{module_id}/{key}")
    return bad


def optimizer_lrs(learner: Any) -> dict[str, float]:
    """The learning rate of each of a Learner's (torch) optimizers, keyed
    `<module id>/<optimizer name>` (PPO: `default_policy/default_optimizer`)."""
    out = {}
    for module_id in list(learner.module.keys()):
        for name, optimizer in learner.get_optimizers_for_module(module_id):
            groups = getattr(optimizer, "param_groups", None)
            if groups:
                out[f"{module_id}/{name}"] = float(groups[0]["lr"])
    return out


def reapply_config_lrs(learner: Any, timestep: int) -> dict[str, float]:
    """Sets each optimizer's learning rate back to what the Learner's own config says
    (the lr Scheduler RLlib built from it, at `timestep`); returns the lrs set.

    A restored checkpoint's optimizer state carries the learning rate of the config
    that saved it: torch's `load_state_dict` puts its param_groups, lr included, over
    the fresh optimizer. RLlib sets the configured lr again only after the next
    update, so a trial that restores another trial's checkpoint with a new lr (PBT and
    PB2's exploit) trains its first iteration with the old one (the PyTorch analogue of
    ray-project/ray#62173 on the new API stack). Optimizers a torch LRScheduler drives
    (`_torch_lr_scheduler_classes`) are left alone: those schedulers own their lr."""
    if getattr(learner, "_lr_schedulers", None):
        return {}
    schedules = getattr(learner, "_optimizer_lr_schedules", {})
    out = {}
    for module_id in list(learner.module.keys()):
        for name, optimizer in learner.get_optimizers_for_module(module_id):
            schedule = schedules.get(optimizer)
            if schedule is None or not getattr(optimizer, "param_groups", None):
                continue
            lr = float(schedule.update(timestep=timestep))
            for group in optimizer.param_groups:
                group["lr"] = lr
            out[f"{module_id}/{name}"] = lr
    return out


class _SweepTrialMixin:
    """Seeds the trial from its index and checks every iteration for NaN losses."""

    def __init__(self, config: Any = None, env: Any = None, **kwargs: Any) -> None:
        config = seeded_config(config)
        if isinstance(config, dict) and CODE_KEY in config:
            config = with_user_code(config)
        if isinstance(config, dict):
            config = as_trial_runs(config, type(self).__name__.removeprefix("Tuner"))
        self._flat_defaults = False
        if isinstance(config, dict) and FLAT_DEFAULTS_KEY in config:
            config = dict(config)
            self._flat_defaults = bool(config.pop(FLAT_DEFAULTS_KEY))
        super().__init__(config=config, env=env, **kwargs)

    @classmethod
    def default_resource_request(cls, config: Any) -> Any:
        """RLlib's, from the config as the trial runs it: Tune asks in the driver, with
        the trial's config dict, where the spec's import paths are still strings that
        RLlib's own config building would import wrongly ("pkg.mod:Name" as the attribute
        "mod:Name" of module "pkg")."""
        if isinstance(config, dict) and CODE_KEY in config:
            config = with_user_code(config)
        return super().default_resource_request(config)

    def _create_local_replay_buffer_if_necessary(self, config: Any) -> Any:
        """RLlib's, for a replay buffer `type` given as a class as well (a spec's import
        path, imported by the trial): RLlib 2.60 tests `"EpisodeReplayBuffer" in type`
        (algorithms/algorithm.py:4475), a TypeError on a class. The buffer is built the same
        way: from_config(ReplayBuffer, replay_buffer_config), with RLlib's smoothing window
        for an episode buffer."""
        buffer = config.get("replay_buffer_config")
        if (
            not isinstance(buffer, dict)
            or not isinstance(buffer.get("type"), type)
            or buffer.get("no_local_replay_buffer")
        ):
            return super()._create_local_replay_buffer_if_necessary(config)
        from ray.rllib.utils.from_config import from_config
        from ray.rllib.utils.replay_buffers import ReplayBuffer
        from ray.rllib.utils.replay_buffers.episode_replay_buffer import EpisodeReplayBuffer

        kwargs = dict(buffer)
        if issubclass(buffer["type"], EpisodeReplayBuffer):
            kwargs["metrics_num_episodes_for_smoothing"] = (
                self.config.metrics_num_episodes_for_smoothing
            )
        return from_config(ReplayBuffer, kwargs)

    def setup(self, config: Any) -> None:
        super().setup(config)
        # DQN / SAC: the flat replay path where it is the same algorithm (_fast_replay)
        self._flat_replay: _fast_replay.TransitionBuffer | None = None
        self._replay_path = ""
        if isinstance(self, DQN):
            why = _fast_replay.eligible(self)
            if why is None:
                self._flat_replay = _fast_replay.buffer_for(self.config)
                self._update_debt = _fast_replay.debt_for(self.config)
                self._replay_path = "flat"
            else:
                self._replay_path = f"rllib ({why})"
                if self._flat_defaults:
                    # RLlib's own step would run a fixed number of updates per vectorised
                    # round, which overshoots: the update ratio the defaults hold breaks
                    raise ValueError(
                        "the flat replay defaults (vectorised envs) were applied but this "
                        f"trial cannot take the flat replay path ({why}); set "
                        "resources.num_envs_per_env_runner in the spec"
                    )
            logger.info("replay path: %s", self._replay_path)

    def training_step(self) -> Any:
        if self._flat_replay is None:
            return super().training_step()
        return _fast_replay.training_step(self, self._flat_replay, self._update_debt)

    def step(self) -> dict[str, Any]:
        # Read before the update: RLlib moves an lr only after it (a schedule's next
        # value), so this is the lr every gradient step of this iteration used.
        lrs = self._learner_lrs()
        result = super().step()
        bad = _nan_losses(result)
        if bad:
            raise FloatingPointError(
                f"NaN/inf loss at iteration {self.iteration + 1}: " + ", ".join(bad)
            )
        import ray

        result["tuner"] = {
            "seed": self.config.seed,
            "node_id": ray.get_runtime_context().get_node_id(),
            "device": _learner_device(self.config),
            "optimizer_lr": lrs,
        }
        if self._replay_path:
            result["tuner"]["replay"] = self._replay_path
        return result

    def _learner_lrs(self) -> dict[str, float]:
        """The optimizer lrs of the first Learner (all Learners share one config)."""
        group = getattr(self, "learner_group", None)
        if group is None:
            return {}
        results = group.foreach_learner(optimizer_lrs)
        return next((r.get() for r in results if r.ok), {})

    def load_checkpoint(self, checkpoint_dir: str) -> None:
        """Restores the checkpoint, then the searched values of this trial's own config
        where the checkpoint put the saving trial's instead.

        Every searched setting is read from `self.config` (the config this trial was
        started with, after a PBT/PB2 exploit the perturbed one), which a checkpoint
        never replaces on the new API stack, except the optimizers' learning rates,
        which travel in the optimizer state (see `reapply_config_lrs`)."""
        super().load_checkpoint(checkpoint_dir)
        group = getattr(self, "learner_group", None)
        if group is None:
            return
        from ray.rllib.utils.metrics import ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME

        steps = self.metrics.peek((ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME), default=0)
        for call in group.foreach_learner(reapply_config_lrs, timestep=int(steps)):
            if not call.ok:
                raise call.get()

    def save_checkpoint(self, checkpoint_dir: str) -> None:
        super().save_checkpoint(checkpoint_dir)
        env, wrappers = (
            split_env_name(self.config.env) if isinstance(self.config.env, str) else (None, None)
        )
        meta = {
            "algorithm": type(self).__name__.removeprefix("Tuner"),
            "env": env,
            "wrappers": wrappers,
            "env_config": dict(self.config.env_config),
            "seed": self.config.seed,
        }
        multi_agent = multi_agent_of(self.config)
        if multi_agent is not None:
            meta["multi_agent"] = multi_agent.model_dump()
        Path(checkpoint_dir, CHECKPOINT_META).write_text(json.dumps(meta, default=str))


def seeded_config(config: Any) -> Any:
    """A trial's config as it runs: a confirmation trial's values and seed laid in, a
    search trial's seed set from the spec seed and its index (Tune's TRIAL_INFO)."""
    if isinstance(config, dict) and isinstance(config.get(CONFIRM_KEY), dict):
        confirm = config[CONFIRM_KEY]
        rest = {k: v for k, v in config.items() if k != CONFIRM_KEY}
        config = apply_values(rest, confirm["values"])
        config["seed"] = int(confirm["seed"])
    elif isinstance(config, dict) and config.get(TRIAL_INFO) is not None:
        config = dict(config)
        index = trial_index(config[TRIAL_INFO].trial_id)
        config["seed"] = trial_seed(int(config.get("seed") or 0), index)
    return config


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
    """Whether the spec's trials run with the algorithm's flat_replay_defaults (DQN:
    vectorised envs) instead of its performance_defaults: they have some, the trials can
    take more envs (_vectorisable) and, as far as the spec tells, take the flat replay
    path (_fast_replay.eligible: one of RLlib's two episode buffers, nothing that keeps a
    trial off it, TUNER_FAST_REPLAY on). The same answer in the API, the driver and the
    trial."""
    if spec.custom_algorithm or not registry.get(spec.algorithm).flat_replay_defaults:
        return False
    if not _vectorisable(spec) or _chosen(spec) & _FLAT_BLOCKERS:
        return False
    if os.environ.get(_fast_replay.SWITCH, "1") == "0":
        return False
    if any(key.startswith("replay_buffer_config") for key in spec.search.space or {}):
        return False
    entry = registry.get(spec.algorithm)
    buffer = deep_merge(entry.preset_config, spec.config).get("replay_buffer_config") or {}
    return buffer.get("type", "PrioritizedEpisodeReplayBuffer") in _FLAT_BUFFERS


def vector_defaults_apply(spec: ExperimentSpec) -> bool:
    """Whether the spec's trials run with the env count of the algorithm's
    performance_defaults (PPO: vectorised envs, the same train batch, minibatches and
    epochs): it has one and the trials can take it (_vectorisable)."""
    if spec.custom_algorithm or _ENVS not in registry.get(spec.algorithm).performance_defaults:
        return False
    return _vectorisable(spec)


def _performance_defaults(spec: ExperimentSpec) -> dict[str, Any]:
    """The performance defaults in force, as config settings (their env count goes to
    the env runners: num_envs_of)."""
    entry = registry.get(spec.algorithm)
    chosen = entry.flat_replay_defaults if flat_defaults_apply(spec) else entry.performance_defaults
    return {k: v for k, v in chosen.items() if k != _ENVS}


def num_envs_of(spec: ExperimentSpec) -> int:
    """Vectorised envs per env runner: the spec's; where it sets none, those of the
    flat_replay_defaults or the performance_defaults where they apply; else 1."""
    if flat_defaults_apply(spec):
        return int(registry.get(spec.algorithm).flat_replay_defaults.get(_ENVS, 1))
    if vector_defaults_apply(spec):
        cfg = TRAINABLES[spec.base_algorithm].get_default_config()
        code = code_settings(spec)
        cfg.update_from_dict({k: v for k, v in fixed_settings(spec).items() if k not in code})
        cfg.learners(num_learners=spec.resources.num_learners)
        runners = spec.resources.num_env_runners
        return envs_for_batch(cfg.total_train_batch_size, runners, most_vector_envs(spec))
    return own_num_envs(spec)


def most_vector_envs(spec: ExperimentSpec) -> int:
    """The env count of the algorithm's vectorised performance default (PPO: 8), which a
    trial takes where its batch is large enough (envs_for_batch)."""
    return int(registry.get(spec.algorithm).performance_defaults[_ENVS])


def envs_for_batch(total_batch: int, runners: int, most: int) -> int:
    """The env count of a vectorised default for a train batch: up to `most`, fewer so
    that each env samples at least MIN_STEPS_PER_ENV steps of every batch (2,048 over no
    remote env runners: 8; 1,000: 3; under 512: 1, so that a small batch's episodes end
    within its iteration as they do on one env)."""
    per_env = MIN_STEPS_PER_ENV * max(int(runners), 1)
    return max(1, min(int(most), int(total_batch) // per_env))


def _trial_rllib_config(config: dict[str, Any], algorithm: str) -> AlgorithmConfig:
    """The RLlib config a trial's config dict (without its markers) builds."""
    cfg = TRAINABLES[registry.base_algorithm(algorithm)].get_default_config()
    return cfg.update_from_dict({k: v for k, v in config.items() if not k.startswith("_tuner")})


def vector_envs(config: dict[str, Any], algorithm: str) -> dict[str, Any]:
    """A trial config with the env count its own train batch gets (envs_for_batch; the
    batch may be sampled), where VECTOR_ENVS_KEY says a vectorised default is in force."""
    out = {k: v for k, v in config.items() if k != VECTOR_ENVS_KEY}
    most = config.get(VECTOR_ENVS_KEY)
    if not most:
        return out
    cfg = _trial_rllib_config(out, algorithm)
    out[_ENVS] = envs_for_batch(cfg.total_train_batch_size, cfg.num_env_runners, int(most))
    return out


def as_trial_runs(config: dict[str, Any], algorithm: str) -> dict[str, Any]:
    """A trial's config dict as the trial runs it: its env count (vector_envs) and its
    held update ratio (hold_update_ratio) set, their markers gone."""
    return hold_update_ratio(vector_envs(config, algorithm), algorithm)


def holds_update_ratio(spec: ExperimentSpec) -> bool:
    """Whether the spec's trials run with a performance default's rollout_fragment_length
    that nothing in the spec (preset, `config`, search space) overrides or pairs with its
    own training_intensity: then each trial holds RLlib's default update ratio."""
    if spec.custom_algorithm:
        return False
    if "rollout_fragment_length" not in _performance_defaults(spec):
        return False
    return not _chosen(spec) & set(_RATIO_KEYS)


def own_num_envs(spec: ExperimentSpec) -> int:
    """The envs per env runner the spec itself asks for (1 unless it sets
    resources.num_envs_per_env_runner): what a trial's HOLD_RATIO_KEY carries (the ratio
    held is RLlib's default for those, not for the envs a performance default adds) and
    what evaluation runs on."""
    return spec.resources.num_envs_per_env_runner or 1


def _auto_fragment(n_step: Any) -> int:
    # RLlib's DQN/SAC `rollout_fragment_length: auto` is the (largest) n-step
    return int(n_step[1] if isinstance(n_step, list | tuple) else n_step or 1)


def hold_update_ratio(config: dict[str, Any], algorithm: str) -> dict[str, Any]:
    """A DQN/SAC trial config with `rollout_fragment_length` from the performance defaults
    and the training_intensity that keeps RLlib's default update ratio (samples trained
    per env step): what `rollout_fragment_length: auto` and no training_intensity give,
    total_train_batch_size / (n_step x envs x (env runners + 1)) in RLlib's own formula
    (dqn.py calculate_rr_weights), envs being the spec's own (HOLD_RATIO_KEY:
    own_num_envs), not those the flat_replay_defaults add. The fragment is rounded
    to a multiple of the auto one, so the updates per sample round come out whole and the
    ratio exact. Only the order changes: R env steps, then R/n_step updates, instead of
    alternating them one by one."""
    out = {k: v for k, v in config.items() if k != HOLD_RATIO_KEY}
    held = config.get(HOLD_RATIO_KEY)
    exact = bool(config.get(FLAT_DEFAULTS_KEY))  # the flat path counts updates exactly
    if not held or out.get("training_intensity"):
        return out
    cfg = _trial_rllib_config(out, algorithm)
    auto = _auto_fragment(cfg.n_step)
    fragment = out.get("rollout_fragment_length")
    if not isinstance(fragment, int):
        return out
    if not exact:  # RLlib's round robin: whole updates per round
        out["rollout_fragment_length"] = auto * max(1, round(fragment / auto))
    own_envs = cfg.num_envs_per_env_runner if held is True else int(held)
    envs = own_envs * max(cfg.num_env_runners + 1, 1)
    out["training_intensity"] = cfg.total_train_batch_size / (auto * envs)
    return out


def derived_settings(
    trial_config: dict[str, Any], spec: ExperimentSpec
) -> tuple[dict[str, Any], dict[str, Any]]:
    """What a trial ran with beyond its spec, as it ran: (config settings, resources).
    The config ones are the held update ratio (the training_intensity hold_update_ratio
    sets, with the rollout_fragment_length as rounded for it); the resources one a
    performance default's env count (DQN's flat path, PPO), and then, where the spec
    evaluates, evaluation's own env count under `evaluation_config` among the config
    ones (a spec that sets the env count itself evaluates on as many). The spec's
    `config` with the first and its `resources` with the second rerun the trial as it
    ran."""
    if spec.custom_algorithm:  # its own loop: nothing of RLlib's is derived
        return {}, {}
    confirm = trial_config.get(CONFIRM_KEY)
    if isinstance(confirm, dict):  # a confirmation trial runs its candidate's values
        rest = {k: v for k, v in trial_config.items() if k != CONFIRM_KEY}
        trial_config = apply_values(rest, confirm["values"])
    config: dict[str, Any] = {}
    ran = as_trial_runs(trial_config, spec.algorithm)
    if HOLD_RATIO_KEY in trial_config and not trial_config.get("training_intensity"):
        config = {k: ran[k] for k in _RATIO_KEYS if k in ran}
    envs = ran.get(_ENVS)
    resources = {_ENVS: envs} if envs is not None and envs != own_num_envs(spec) else {}
    if resources and spec.evaluation.interval:
        evaluation = dict(fixed_settings(spec).get("evaluation_config") or {})
        config["evaluation_config"] = {**evaluation, _ENVS: own_num_envs(spec)}
    return config, resources


def update_ratio(config: AlgorithmConfig) -> float:
    """Samples trained per env step sampled that a DQN/SAC config gives (RLlib's round
    robin of sampling and training, dqn.py calculate_rr_weights)."""
    from ray.rllib.algorithms.dqn.dqn import calculate_rr_weights

    store, train = calculate_rr_weights(config)
    sampled = store * config.get_rollout_fragment_length() * config.num_envs_per_env_runner
    return train * config.total_train_batch_size / (sampled * max(config.num_env_runners, 1))


def with_user_code(config: dict[str, Any]) -> dict[str, Any]:
    """A trial's config dict with the spec's code (CODE_KEY) imported and set where RLlib
    reads it: each import path its RLlib settings name at a code position (`config`,
    `model`, sampled search-space values; e.g. `replay_buffer_config.type`) replaced by the
    class or function, the callbacks and the module. Runs in the trial's process; the paths
    were checked against the operator's allowed modules before the sweep started."""
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    from tuner.trials._envs import load_object

    out = {k: v for k, v in config.items() if k != CODE_KEY}
    code = config.get(CODE_KEY) or {}
    if code.get("paths"):
        out = resolve_paths(out, code["paths"])
    if code.get("callbacks"):
        out["callbacks"] = [load_object(path) for path in code["callbacks"]]
    if code.get("module"):
        # the sampled `model.*` values are in the config by now: the module gets them all
        model = dict(out.get(MODEL_CONFIG_KEY) or {})
        out["_rl_module_spec"] = RLModuleSpec(
            module_class=load_object(code["module"]), model_config=model
        )
    return out


def user_code(spec: ExperimentSpec) -> dict[str, Any]:
    """The spec's code by import path, as a trial config carries it under CODE_KEY:
    callbacks, module, and the import paths its `config`, `model` and search space name at
    RLlib code positions ("paths")."""
    code: dict[str, Any] = {}
    if spec.callbacks:
        code["callbacks"] = list(spec.callbacks)
    if spec.module:
        code["module"] = spec.module
    paths = import_paths(spec.config, spec.model, space=spec.search.space or {})
    if paths:
        code["paths"] = paths
    return code


class TunerPPO(_SweepTrialMixin, PPO):
    """PPO as a sweep trial."""


class TunerAPPO(_SweepTrialMixin, APPO):
    """APPO as a sweep trial."""


class TunerIMPALA(_SweepTrialMixin, IMPALA):
    """IMPALA as a sweep trial."""


class TunerDQN(_SweepTrialMixin, DQN):
    """DQN (and every DQN preset) as a sweep trial."""


class TunerSAC(_SweepTrialMixin, SAC):
    """SAC as a sweep trial; its RLModule builds with TunerSACCatalog (`model.q_encoder`)."""

    @classmethod
    def get_default_config(cls) -> AlgorithmConfig:
        return TunerSACConfig(algo_class=cls)


TRAINABLES: dict[str, type[Algorithm]] = {
    "PPO": TunerPPO,
    "APPO": TunerAPPO,
    "IMPALA": TunerIMPALA,
    "DQN": TunerDQN,
    "SAC": TunerSAC,
}


def preset_warnings(algorithm: str) -> list[str]:
    """Warnings a preset carries (settings RLlib accepts but ignores)."""
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


def trainable_for(spec: ExperimentSpec) -> Any:
    """The trainable that runs the spec's trials: an RLlib algorithm class, or the spec's
    own training loop wrapped (tuner.trials._custom)."""
    if spec.custom_algorithm:
        from tuner.trials._custom import custom_trainable

        return custom_trainable(spec.algorithm)
    return TRAINABLES[spec.base_algorithm]


@cache
def rllib_keys(base_algorithm: str) -> frozenset[str]:
    """Config names RLlib knows for an algorithm (its `to_dict()` keys)."""
    cfg = TRAINABLES[base_algorithm].get_default_config()
    return frozenset(k for k in cfg.to_dict() if not k.startswith("_")) | {
        "model_config",
        "train_batch_size_per_learner",
    }


def fixed_settings(spec: ExperimentSpec) -> dict[str, Any]:
    """The algorithm's performance defaults, the preset's settings over them, and the
    spec's own `config` over both (the registry: tuner/algorithms). With `wrappers:
    atari` and no conv_filters in the spec's `model` (or its config's model_config), the
    model_config gets the Atari CNN (ATARI_CONV_FILTERS), so it is reported and logged
    with the rest."""
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
    """The fixed settings (fixed_settings) that name code by import path at a code
    position, whole top-level entries (`replay_buffer_config` with its `type`). build_config
    leaves them out: RLlib's update_from_dict would import such strings itself (in the
    API's validator too, and wrongly: "pkg.mod:Name" as the attribute "mod:Name" of
    module "pkg"). trial_params lays them into the trial's config, and the trial imports
    them (with_user_code)."""
    if spec.custom_algorithm:
        return {}
    return {k: v for k, v in fixed_settings(spec).items() if import_paths({k: v})}


# RLlib's single-agent episode replay buffers and their multi-agent counterparts: a
# multi-agent DQN/SAC needs the latter (the former cannot hold MultiAgentEpisodes).
MULTI_AGENT_BUFFERS = {
    "EpisodeReplayBuffer": "MultiAgentEpisodeReplayBuffer",
    "PrioritizedEpisodeReplayBuffer": "MultiAgentPrioritizedEpisodeReplayBuffer",
}


def map_agent(
    mapping: tuple[tuple[str, str], ...], default: str, agent_id: Any, *_: Any, **__: Any
) -> str:
    """RLlib's policy_mapping_fn of a spec's multi_agent section, bound with
    functools.partial (module-level, so it pickles by reference into every env runner):
    the policy of str(agent_id) in `mapping`, else `default`."""
    return dict(mapping).get(str(agent_id), default)


def policy_mapping_fn(multi_agent: MultiAgentSpec) -> functools.partial[str]:
    """The policy_mapping_fn RLlib calls as fn(agent_id, episode, **kwargs), built from
    the spec's data: listed agents, then '*', then the first policy."""
    default = multi_agent.policy_mapping.get("*", multi_agent.policies[0])
    listed = tuple(sorted((a, p) for a, p in multi_agent.policy_mapping.items() if a != "*"))
    return functools.partial(map_agent, listed, default)


def multi_agent_of(config: AlgorithmConfig) -> MultiAgentSpec | None:
    """The multi_agent section a config was built from (None: single-agent), read back
    from its policies and the policy_mapping_fn that policy_mapping_fn() made."""
    if not config.is_multi_agent:
        return None
    fn = config.policy_mapping_fn
    mapping: dict[str, str] = {}
    if isinstance(fn, functools.partial) and fn.func is map_agent:
        listed, default = fn.args
        mapping = {**dict(listed), "*": default}
    return MultiAgentSpec(policies=list(config.policies), policy_mapping=mapping)


def _multi_agent(config: AlgorithmConfig, multi_agent: MultiAgentSpec) -> None:
    """One RLModule per policy (RLlib's default module of the algorithm, with the
    config's model_config, so `model` and searched `model.<key>` values reach each),
    agents mapped by the spec's policy_mapping, and a multi-agent replay buffer."""
    from ray.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    config.multi_agent(
        policies=list(multi_agent.policies), policy_mapping_fn=policy_mapping_fn(multi_agent)
    )
    config.rl_module(
        rl_module_spec=MultiRLModuleSpec(
            rl_module_specs={pid: RLModuleSpec() for pid in multi_agent.policies}
        )
    )
    buffer = getattr(config, "replay_buffer_config", None)
    if isinstance(buffer, dict) and buffer.get("type") in MULTI_AGENT_BUFFERS:
        config.replay_buffer_config = {**buffer, "type": MULTI_AGENT_BUFFERS[buffer["type"]]}


def build_config(spec: ExperimentSpec, env_name: str | None = None) -> AlgorithmConfig:
    """The AlgorithmConfig of one trial before sampling: preset, user config, env,
    resources, model, multi-agent policies, evaluation and seed. Settings that name code
    by import path (code_settings) are left out: the trial sets them (trial_params)."""
    trainable = trainable_for(spec)
    config = trainable.get_default_config()
    fixed = fixed_settings(spec)
    model = fixed.pop("model_config", None) or {}
    code = code_settings(spec)
    config.update_from_dict({k: v for k, v in fixed.items() if k not in code})
    r = spec.resources
    envs = num_envs_of(spec)
    config.environment(
        env=env_name or _env_name(spec.env, spec.wrappers),
        env_config=env_config_for(spec.env_config, spec.wrappers),
    )
    config.env_runners(
        num_env_runners=r.num_env_runners,
        num_envs_per_env_runner=envs,
        num_cpus_per_env_runner=r.num_cpus_per_env_runner,
        num_gpus_per_env_runner=r.num_gpus_per_env_runner,
    )
    config.learners(num_learners=r.num_learners, num_gpus_per_learner=r.num_gpus_per_learner)
    config.resources(
        num_cpus_for_main_process=r.num_cpus_for_main_process,
        placement_strategy=r.placement_strategy,
    )
    if model or spec.model:
        config.rl_module(model_config={**model, **spec.model})
    if spec.multi_agent is not None:
        _multi_agent(config, spec.multi_agent)
    if spec.evaluation.interval:
        config.evaluation(
            evaluation_interval=spec.evaluation.interval,
            evaluation_duration=spec.evaluation.duration,
            evaluation_duration_unit="episodes",
        )
        if envs != own_num_envs(spec) or vector_defaults_apply(spec):
            # evaluation keeps the spec's own env count (a trial's own batch may give it
            # more: vector_envs): RLlib's episode-count evaluation over parallel envs
            # returns the first episodes to end, the shorter ones
            own = {_ENVS: own_num_envs(spec)}
            config.evaluation(evaluation_config={**own, **(config.evaluation_config or {})})
    config.debugging(seed=spec.seed)
    return config
