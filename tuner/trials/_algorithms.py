"""RLlib algorithms and presets: from a spec to an AlgorithmConfig and a trainable.

The trainables are thin subclasses of RLlib's algorithms that add what a sweep
needs and RLlib does not do by itself: a per-trial seed derived from the spec
seed and the trial's index, a NaN-loss check that turns a diverged trial into an
errored one, and where the trial ran (node, device) in every result.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
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
from tuner.spec import ExperimentSpec

CHECKPOINT_META = "tuner.json"  # env and algorithm of a checkpoint, for `tuner evaluate`
MODEL_PREFIX = "model."
ENV_CONFIG_PREFIX = "env_config."
MODEL_CONFIG_KEY = "_model_config"  # where AlgorithmConfig.to_dict() keeps model_config
# A confirmation trial's config carries the values and seed it re-runs under this key;
# the trial applies them before RLlib sees its config.
CONFIRM_KEY = "_tuner_confirm"


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
    return "confirm" if isinstance(trial_config.get(CONFIRM_KEY), dict) else "search"


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
                bad.append(f"learners/{module_id}/{key}")
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
        if isinstance(config, dict) and isinstance(config.get(CONFIRM_KEY), dict):
            confirm = config[CONFIRM_KEY]
            rest = {k: v for k, v in config.items() if k != CONFIRM_KEY}
            config = apply_values(rest, confirm["values"])
            config["seed"] = int(confirm["seed"])
        elif isinstance(config, dict) and config.get(TRIAL_INFO) is not None:
            config = dict(config)
            index = trial_index(config[TRIAL_INFO].trial_id)
            config["seed"] = trial_seed(int(config.get("seed") or 0), index)
        super().__init__(config=config, env=env, **kwargs)

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
        env = self.config.env if isinstance(self.config.env, str) else None
        meta = {
            "algorithm": type(self).__name__.removeprefix("Tuner"),
            "env": env,
            "env_config": dict(self.config.env_config),
            "seed": self.config.seed,
        }
        Path(checkpoint_dir, CHECKPOINT_META).write_text(json.dumps(meta, default=str))


class TunerPPO(_SweepTrialMixin, PPO):
    """PPO as a sweep trial."""


class TunerAPPO(_SweepTrialMixin, APPO):
    """APPO as a sweep trial."""


class TunerIMPALA(_SweepTrialMixin, IMPALA):
    """IMPALA as a sweep trial."""


class TunerDQN(_SweepTrialMixin, DQN):
    """DQN (and every DQN preset) as a sweep trial."""


class TunerSAC(_SweepTrialMixin, SAC):
    """SAC as a sweep trial."""


TRAINABLES: dict[str, type[Algorithm]] = {
    "PPO": TunerPPO,
    "APPO": TunerAPPO,
    "IMPALA": TunerIMPALA,
    "DQN": TunerDQN,
    "SAC": TunerSAC,
}


def presets() -> dict[str, dict[str, Any]]:
    """Named presets (tuner/algorithms/presets.yaml): algorithm, doc, config, warnings."""
    return {
        e.name: {
            "algorithm": e.base_algorithm,
            "doc": e.doc,
            "config": e.preset_config,
            "warnings": e.warnings,
        }
        for e in registry.algorithms()
        if e.preset_config or e.warnings
    }


def preset_warnings(algorithm: str) -> list[str]:
    """Warnings a preset carries (settings RLlib accepts but ignores)."""
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


def trainable_for(spec: ExperimentSpec) -> type[Algorithm]:
    """The trainable class that runs the spec's trials."""
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
    spec's own `config` over both (the registry: tuner/algorithms)."""
    entry = registry.get(spec.algorithm)
    return deep_merge(deep_merge(entry.performance_defaults, entry.preset_config), spec.config)


def build_config(spec: ExperimentSpec, env_name: str | None = None) -> AlgorithmConfig:
    """The AlgorithmConfig of one trial before sampling: preset, user config, env,
    resources, model, evaluation and seed."""
    trainable = trainable_for(spec)
    config = trainable.get_default_config()
    fixed = fixed_settings(spec)
    model = fixed.pop("model_config", None) or {}
    config.update_from_dict(fixed)
    r = spec.resources
    config.environment(env=env_name or spec.env, env_config=dict(spec.env_config))
    config.env_runners(
        num_env_runners=r.num_env_runners,
        num_envs_per_env_runner=r.num_envs_per_env_runner,
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
    if spec.evaluation.interval:
        config.evaluation(
            evaluation_interval=spec.evaluation.interval,
            evaluation_duration=spec.evaluation.duration,
            evaluation_duration_unit="episodes",
        )
    config.debugging(seed=spec.seed)
    return config
