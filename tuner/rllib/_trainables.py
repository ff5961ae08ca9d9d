"""The trainables: thin subclasses of RLlib's algorithms that add what a sweep needs and
RLlib does not do by itself: a per-trial seed derived from the spec seed and the trial's
index, a NaN-loss check that turns a diverged trial into an errored one, where the trial
ran (node, device) in every result, the flat replay path for DQN/SAC, and a checkpoint
that `tuner evaluate` can restore (`tuner.json`)."""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ray.rllib.algorithms.algorithm import Algorithm
from ray.rllib.algorithms.algorithm_config import AlgorithmConfig
from ray.rllib.algorithms.appo import APPO
from ray.rllib.algorithms.dqn import DQN
from ray.rllib.algorithms.impala import IMPALA
from ray.rllib.algorithms.ppo import PPO
from ray.rllib.algorithms.sac import SAC

from tuner.mlflow_names import (
    AGENT_RETURNS,
    EPISODES_KEY,
    LEARNERS_PREFIX,
    LENGTH_KEY,
    MODULE_RETURNS,
    RETURN_KEY,
    RETURN_MAX_KEY,
    RETURN_MIN_KEY,
)
from tuner.ray_internals import (
    IterationEndHook,
    LocalReplayBufferHook,
    fuse_adam,
    lean_cpu_steps,
    optimizer_lr_schedules,
    rebuild_in_place,
    torch_schedulers_own_lr,
)
from tuner.rllib import (
    _fast_replay,
    _lean_mlp,
    _lean_modes,
    _lean_sampling,
    _lean_torch,
    _machine,
)
from tuner.rllib._envs import split_env_name
from tuner.rllib._evaluate import evaluate_checkpoint
from tuner.rllib._lean_metrics import TunerDQNConfig
from tuner.rllib._lean_ppo import TunerPPOConfig
from tuner.rllib._multi_agent import multi_agent_of
from tuner.rllib._sac_model import TunerSACConfig
from tuner.rllib._trial_config import (
    CHECKPOINT_META,
    CODE_KEY,
    FINAL_EVAL_KEY,
    FLAT_DEFAULTS_KEY,
    budget_spent,
    seeded_config,
)
from tuner.rllib._update_ratio import as_trial_runs
from tuner.rllib._user_code import with_user_code

logger = logging.getLogger(__name__)


# "0" in a trial's environment: its CPU Learners keep RLlib's own gradient step (A/B runs)
LEAN_STEPS_SWITCH = "TUNER_LEAN_STEPS"


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def _learner_device(config: AlgorithmConfig) -> str:
    if config.num_gpus_per_learner and config.num_learners == 0:
        import ray

        gpu_ids = ray.get_gpu_ids()
        return f"cuda:{gpu_ids[0]}" if gpu_ids else "cuda:0"
    if config.num_gpus_per_learner:
        return "cuda (remote learners)"
    return "cpu"


def _trial_cpu(group: Any) -> str:
    """The CPU this trial's process trains on (`_machine.cpu_description`), with its
    remote Learners' where they run on another."""
    own = _machine.cpu_description()
    if group is None or group.is_local:
        return own
    theirs = sorted({call.get() for call in group.foreach_learner(_machine.learner_cpu) if call.ok})
    return f"{own}; learners: {' | '.join(theirs)}" if theirs and theirs != [own] else own


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
    (`lr_scheduler_classes` of the optimizer config) are left alone: those schedulers own
    their lr."""
    if torch_schedulers_own_lr(learner):
        return {}
    schedules = optimizer_lr_schedules(learner)
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


class _SweepTrialMixin(IterationEndHook, LocalReplayBufferHook):
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
        self._final_eval: dict[str, int | None] = {}
        if isinstance(config, dict) and FINAL_EVAL_KEY in config:
            config = dict(config)
            self._final_eval = dict(config.pop(FINAL_EVAL_KEY) or {})
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

    def reset_config(self, new_config: dict[str, Any]) -> bool:
        """Tune's reuse_actors: this actor runs the next trial. RLlib's Algorithm has no
        reset of its own, so the algorithm is built again in place from `new_config` as
        a fresh actor builds it (its learners and env runners stopped first); the
        process's start and imports, seconds per trial, are what it saves. The old
        algorithm's memory is freed before the new one is built (a GPU's cached blocks
        too, which otherwise only the process's exit gives back to the trials sharing
        it)."""
        rebuild_in_place(self, new_config, before_build=self._release_stopped)
        return True

    def _release_stopped(self) -> None:
        """Frees the stopped algorithm now, not once the new one is built: its parts
        (which __init__ replaces only then) let go, the cycles they hold collected, and
        where CUDA is in use the blocks torch's allocator cached."""
        self.learner_group = None
        self.env_runner_group = None
        self.eval_env_runner_group = None
        self.local_replay_buffer = None
        self._flat_replay = None
        import gc

        gc.collect()
        import torch

        if torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.empty_cache()

    def tuner_replay_buffer(self, config: Any, rllib_default: Callable[[Any], Any]) -> Any:
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
            return rllib_default(config)
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
        # CPU Learners: the same gradient steps, without their per-tensor overhead
        self._lean_steps = False
        group = getattr(self, "learner_group", None)
        self._cpu = _trial_cpu(group)  # the kernels a seed's numbers depend on
        if group is not None and os.environ.get(LEAN_STEPS_SWITCH, "1") != "0":
            calls = group.foreach_learner(lean_cpu_steps)
            for call in calls:
                if not call.ok:
                    logger.warning("RLlib's own gradient step kept: %r", call.get())
            self._lean_steps = all(call.ok and call.get() for call in calls)
            # train() before each update walks the module tree only if a flag changes
            group.foreach_learner(_lean_modes.lean_learner_modes)
        runners = getattr(self, "env_runner_group", None)
        if os.environ.get(LEAN_STEPS_SWITCH, "1") != "0":
            # torch's deterministic mode without its NaN fill of every new tensor, in this
            # process and every Learner's and env runner's (the same updates and actions)
            _lean_torch.skip_uninitialized_fill()
            if group is not None:
                group.foreach_learner(_lean_torch.skip_uninitialized_fill)
            for each in (runners, getattr(self, "eval_env_runner_group", None)):
                if each is not None:
                    each.foreach_env_runner(_lean_torch.skip_uninitialized_fill)
            # RLlib's MLPs as flat functions of their layers: the same ops, no module call
            # a layer (learners' and env runners' modules alike)
            if group is not None:
                group.foreach_learner(_lean_mlp.lean_learner_mlps)
            for each in (runners, getattr(self, "eval_env_runner_group", None)):
                if each is not None:
                    each.foreach_env_runner(_lean_mlp.lean_runner_mlps)
        # every env runner: the default connector pipelines without their per-step
        # overhead, where the lean ones make the same batches (_lean_sampling)
        self._sampling_path = ""
        if runners is not None and _lean_sampling.lean_sampling_on():
            paths = set(runners.foreach_env_runner(_lean_sampling.install))
            self._sampling_path = ", ".join(sorted(paths))
            logger.info("sampling path: %s", self._sampling_path)
        # DQN / SAC: the flat replay path where it is the same algorithm (_fast_replay)
        self._flat_replay: _fast_replay.TransitionBuffer | None = None
        self._replay_path = ""
        if isinstance(self, DQN):
            why = _fast_replay.eligible(self)
            if why is None:
                self._flat_replay = _fast_replay.buffer_for(self.config)
                self._update_debt = _fast_replay.debt_for(self.config)
                self._replay_path = "flat"
                if self._flat_replay.alpha is None and group is not None:
                    # a uniform buffer never reads the TD errors: not kept or logged
                    group.foreach_learner(_fast_replay.drop_td_errors)
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

    def tuner_iteration_end(self) -> None:
        """The flat path's learner metrics of the iteration, reduced (IterationEndHook)."""
        if self._flat_replay is not None:
            _fast_replay.end_iteration(self)

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
            "cpu": self._cpu,
            "optimizer_lr": lrs,
        }
        if self._replay_path:
            result["tuner"]["replay"] = self._replay_path
        if self._sampling_path:
            result["tuner"]["sampling"] = self._sampling_path
        if self._final_eval and budget_spent(self._final_eval, result, self.iteration + 1):
            # evaluation.at_end: the final policy, deterministic, played as `tuner
            # evaluate` plays its checkpoint (episode i from seed + i), so that the score
            # is the one anyone gets again from the trial's checkpoint; it stands in for
            # an evaluation RLlib ran this iteration (evaluation.interval)
            result["evaluation"] = self._final_evaluation()
        return result

    def _final_evaluation(self) -> dict[str, Any]:
        """`evaluate_checkpoint` of this trial's policy as it is now (saved to a scratch
        checkpoint), as RLlib reports an evaluation: {"env_runners": {...}}."""
        import tempfile

        with tempfile.TemporaryDirectory(prefix="tuner-final-eval-") as tmp:
            self.save_checkpoint(tmp)
            played = evaluate_checkpoint(
                tmp,
                episodes=int(self._final_eval.get("episodes") or 10),
                seed=int(self.config.seed or 0),
            )
        flat: dict[str, Any] = {
            RETURN_KEY: played.mean_return,
            RETURN_MAX_KEY: max(played.returns),
            RETURN_MIN_KEY: min(played.returns),
            LENGTH_KEY: sum(played.lengths) / len(played.lengths),
            EPISODES_KEY: played.episodes,
        }
        if played.agent_returns:
            flat[AGENT_RETURNS] = {a: _mean(r) for a, r in played.agent_returns.items()}
            flat[MODULE_RETURNS] = {p: _mean(r) for p, r in played.module_returns.items()}
        nested: dict[str, Any] = {}
        for key, value in flat.items():  # "env_runners/x" -> {"env_runners": {"x": ...}}
            group, name = key.split("/", 1)
            nested.setdefault(group, {})[name] = value
        return nested

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
        if getattr(self, "_lean_steps", False):  # the checkpoint's param_groups replaced ours
            for call in group.foreach_learner(fuse_adam):
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


class TunerPPO(_SweepTrialMixin, PPO):
    """PPO as a sweep trial; its torch Learner computes RLlib's loss leaner (_lean_ppo)."""

    @classmethod
    def get_default_config(cls) -> AlgorithmConfig:
        return TunerPPOConfig(algo_class=cls)


class TunerAPPO(_SweepTrialMixin, APPO):
    """APPO as a sweep trial."""


class TunerIMPALA(_SweepTrialMixin, IMPALA):
    """IMPALA as a sweep trial."""


class TunerDQN(_SweepTrialMixin, DQN):
    """DQN (and every DQN preset) as a sweep trial; its torch Learner logs the loss's
    metrics once per reduce (_lean_metrics)."""

    @classmethod
    def get_default_config(cls) -> AlgorithmConfig:
        return TunerDQNConfig(algo_class=cls)


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
