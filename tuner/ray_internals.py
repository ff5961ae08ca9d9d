"""The one door to Ray's, RLlib's and Tune's private names (Ray 2.60).

Every private name of Ray that tuner uses (a module, attribute, method, keyword or
config key starting with `_`) is used here and nowhere else, each with the reason we
cannot do without it. `PRIVATE_NAMES` lists them, read from ray_internals.yaml;
tests/unit/test_ray_internals.py checks each against the installed Ray (it fails loudly
if one moves or changes shape), and tests/unit/test_owners.py checks that no other
module of tuner/ or bench/ uses one.

Ray is imported lazily: the functions here run in processes that have Ray already.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel

from tuner.data_files import load_data_file


class PrivateName(BaseModel):
    """A private name we use: where it lives ("module:Class" or "module:function"),
    the name, what kind of use (attribute, method we override, method we call, keyword,
    config key, copied code) and why. One entry of ray_internals.yaml."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    owner: str = Field(pattern=r"^[\w.]+:[\w.]+$")
    name: str = Field(pattern=r"^_\w+$")
    kind: Literal[
        "attribute", "method we override", "method we call", "keyword", "config key", "copied code"
    ]
    why: str = Field(min_length=1)


class PrivateNamesFile(RootModel[list[PrivateName]]):
    """ray_internals.yaml: every private name tuner uses."""

    model_config = ConfigDict(frozen=True)


def read_private_names(
    path: Path = Path(__file__).with_name("ray_internals.yaml"),
) -> tuple[PrivateName, ...]:
    """The private names listed in `path` (the list kept as data beside this module)."""
    return tuple(load_data_file(path, PrivateNamesFile).root)


PRIVATE_NAMES: tuple[PrivateName, ...] = read_private_names()

# The sha256 of DQNLearner.after_gradient_based_update's source in the Ray the lean
# target update (lean_target_updates) was ported from (2.60).
TARGET_UPDATE_SOURCE = "112cd41c8b490f39d5f54ea5efb18f5e32bd647c71409836cdca778566d0b876"

# The sha256 of DQN._training_step_new_api_stack's source in the Ray the flat replay
# path was ported from (2.60): a Ray whose step changed fails its test until the port is
# checked again.
TRAINING_STEP_SOURCE = "09ec62b710932ad18e0fda0308c568560a33155fd61d9288d379bce2b44cfa11"
# The same for Learner.update, whose one-batch path `single_batch_update` follows.
LEARNER_UPDATE_SOURCE = "3881ea9242770af1f42fd8c9e17fc9d23941bbd0044f21b2ff78afc4ec3ff06c"
# The same for DefaultDQNTorchRLModule._forward_exploration, whose actions
# rllib/_lean_exploration.py computes.
DQN_EXPLORATION_SOURCE = "0a0d7d7e7b81463b4788e531c7325fac39b434af5b667dea8f47836daa235a80"


# --- Ray itself -----------------------------------------------------------------------------


def no_prestarted_workers() -> dict[str, Any]:
    """ray.init keywords for a local Ray that starts no idle worker ahead of its driver."""
    return {"_system_config": {"prestart_worker_first_driver": False}}


def rebuild_in_place(
    trainable: Any, new_config: dict[str, Any], before_build: Callable[[], None]
) -> None:
    """Builds a Tune Trainable again, in its own actor, for the next trial (Tune's
    reuse_actors; called from reset_config, after Tune's reset has set the trial's info,
    storage and log dir): stop (the algorithm's cleanup, the system-usage monitor thread
    that __init__ starts anew, the log files), then __init__ with the new config exactly
    as a fresh actor runs it. Tune's reset zeroes the counters after. Log files
    (RunConfig's log_to_file, which tuner never sets) would not be carried over."""
    from ray.tune.result import TRIAL_INFO

    info, storage = trainable._trial_info, trainable._storage
    trainable.stop()
    before_build()
    trainable.__init__(config={**new_config, TRIAL_INFO: info}, storage=storage)


# --- AlgorithmConfig.to_dict() keys ------------------------------------------------------

MODEL_CONFIG_KEY = "_model_config"
RL_MODULE_SPEC_KEY = "_rl_module_spec"


def config_key(key: str, config: dict[str, Any]) -> str:
    """Where a config dict (AlgorithmConfig.to_dict()) keeps a setting: its own name, or
    the private name RLlib keeps a property under (`train_batch_size_per_learner` ->
    `_train_batch_size_per_learner`)."""
    if key not in config and f"_{key}" in config:
        return f"_{key}"
    return key


# --- AlgorithmConfig and Algorithm --------------------------------------------------------


def has_own_connectors(config: Any) -> bool:
    """Whether a config sets its own learner or env-to-module connector."""
    return config._learner_connector is not None or config._env_to_module_connector is not None


def module_is_stateful(algo: Any) -> bool:
    """Whether an Algorithm's RLModule is recurrent (True when RLlib did not say)."""
    return bool(getattr(algo, "_module_is_stateful", True))


class LocalReplayBufferHook:
    """Mixin for an Algorithm subclass: RLlib's private hook that builds the local
    replay buffer calls the subclass's `tuner_replay_buffer(config, rllib_default)`."""

    def _create_local_replay_buffer_if_necessary(self, config: Any) -> Any:
        return self.tuner_replay_buffer(  # type: ignore[attr-defined]
            config,
            super()._create_local_replay_buffer_if_necessary,  # type: ignore[misc]
        )


# --- sampling and updating as DQN's own step does -----------------------------------------


def sample_env_runners(algo: Any) -> tuple[Any, Any]:
    """(episodes, env runner metrics) of one synchronous sample of every env runner, as
    DQN's training step samples."""
    from ray.rllib.execution.rollout_ops import synchronous_parallel_sample

    return synchronous_parallel_sample(
        worker_set=algo.env_runner_group,
        concat=True,
        sample_timeout_s=algo.config.sample_timeout_s,
        _uses_new_env_runners=True,
        _return_metrics=True,
    )


def env_runner_pipelines(runner: Any) -> tuple[Any, Any]:
    """An env runner's env-to-module and module-to-env connector pipelines.

    Args:
        runner: A SingleAgentEnvRunner.

    Returns:
        (env-to-module pipeline, module-to-env pipeline).
    """
    return runner._env_to_module, runner._module_to_env


def sync_local_weights(algo: Any) -> bool:
    """The weights of a local Learner's one module copied, tensor by tensor, into the
    local env runner's module: what EnvRunnerGroup.sync_weights(inference_only=True)
    leaves there (the same values, the same weights_seq_no, no copy where nothing was
    trained since), without its trip through numpy and the object store (ray.put with no
    remote runner to read it). Where it does not fit (remote env runners or Learners,
    several modules, a state the env runner's module names differently) nothing is
    copied and the caller syncs through RLlib.

    Args:
        algo: The Algorithm.

    Returns:
        Whether it synced them.
    """
    import torch

    group, learners = algo.env_runner_group, algo.learner_group
    runner = group.local_env_runner
    if runner is None or group.num_remote_workers() or not learners.is_local:
        return False
    learner = learners._learner
    if len(learner.module.keys()) != 1 or not isinstance(runner.module, torch.nn.Module):
        return False
    (module_id,) = learner.module.keys()
    source = learner.module[module_id].state_dict(keep_vars=True)
    target = runner.module.state_dict(keep_vars=True)
    if not target.keys() <= source.keys():
        return False
    seq = learner._weights_seq_no
    if seq == 0 or runner._weights_seq_no < seq:  # as the env runner's set_state decides
        with torch.no_grad():
            for name, tensor in target.items():
                tensor.copy_(source[name])
    if seq > 0:
        runner._weights_seq_no = seq
    return True


def single_batch_update(learner: Any, batch: Any, timesteps: dict[str, Any]) -> None:
    """What RLlib 2.60's Learner.update does with one MultiAgentBatch of tensors already
    on the Learner's device, one epoch, no minibatches, its metrics left unreduced: the
    same calls, in the same order, on the same batch, so the same weights and the same
    logged values (tests/integration/test_lean_metrics.py). Left out: its TrainingData
    and batch iterator (nothing to convert, split or slice: the flat path's modules are
    stateless) and Ray's Prometheus timer and counters of the update, a fifth of a small
    DQN update's time (docs/benchmarks.md).

    Args:
        learner: A torch Learner, built.
        batch: The MultiAgentBatch, its columns torch tensors on the Learner's device.
        timesteps: The update's timesteps (NUM_ENV_STEPS_SAMPLED_LIFETIME, ...).
    """
    learner.before_gradient_based_update(timesteps=timesteps)
    learner._weights_seq_no += 1
    for module_id in list(batch.policy_batches):
        if not learner.should_module_be_updated(module_id, batch):
            del batch.policy_batches[module_id]
    if not batch.policy_batches:
        return
    unknown = set(batch.policy_batches) - set(learner.module.keys())
    if unknown:
        raise ValueError(f"Batch contains ModuleIDs ({unknown}) that are not in this Learner!")
    _, loss_per_module, _ = learner._update(batch.policy_batches)
    learner._log_steps_trained_metrics(batch)
    for module_id, loss in loss_per_module.items():
        learner.metrics.log_value(key=(module_id, learner.TOTAL_LOSS_KEY), value=loss, window=1)
    learner.after_gradient_based_update(timesteps=timesteps)


def override_exploration(module: Any, exploration: Callable[..., Any]) -> None:
    """Gives one RLModule instance its own exploration pass: RLlib's forward_exploration
    calls `exploration(module, batch, **kwargs)` in place of the class's
    `_forward_exploration` (a partial, not a bound method: the module still pickles, and
    a deepcopy's pass computes on the copy).

    Args:
        module: The RLModule.
        exploration: The pass, taking the module first.
    """
    import functools

    module._forward_exploration = functools.partial(exploration, module)


class LeanMinibatchHook:
    """Mixin for a Learner: where RLlib would iterate a train batch with its
    MiniBatchCyclicIterator (minibatches, no sequences sliced in B), the Learner's
    `tuner_minibatches` may yield the very same minibatches leanly."""

    def _create_iterator_if_necessary(
        self,
        *,
        training_data: Any,
        num_total_minibatches: int = 0,
        num_epochs: int = 1,
        minibatch_size: int | None = None,
        shuffle_batch_per_epoch: bool = False,
        **kwargs: Any,
    ) -> Any:
        """RLlib's iterator, or the lean one over the same batch with the same settings.

        Args:
            training_data: As RLlib's.
            num_total_minibatches: As RLlib's.
            num_epochs: As RLlib's.
            minibatch_size: As RLlib's.
            shuffle_batch_per_epoch: As RLlib's.
            **kwargs: As RLlib's.

        Returns:
            The minibatch iterator (or RLlib's {} where nothing is left to update).
        """
        from ray.rllib.utils.minibatch_utils import MiniBatchCyclicIterator

        iterator = super()._create_iterator_if_necessary(  # type: ignore[misc]
            training_data=training_data,
            num_total_minibatches=num_total_minibatches,
            num_epochs=num_epochs,
            minibatch_size=minibatch_size,
            shuffle_batch_per_epoch=shuffle_batch_per_epoch,
            **kwargs,
        )
        if type(iterator) is not MiniBatchCyclicIterator or not minibatch_size:
            return iterator
        batch = iterator._batch
        if any(b._slice_seq_lens_in_B for b in batch.policy_batches.values()):
            return iterator
        lean = self.tuner_minibatches(  # type: ignore[attr-defined]
            batch,
            num_epochs=num_epochs,
            minibatch_size=minibatch_size,
            shuffle=shuffle_batch_per_epoch and num_epochs > 1,
            num_total_minibatches=num_total_minibatches,
        )
        return iterator if lean is None else lean


def update_unreduced(learner_group: Any, batch: Any, timesteps: dict[str, Any]) -> None:
    """One learner update whose metrics are left unreduced (the next reduce takes them)."""
    learner_group.update(batch=batch, timesteps=timesteps, _no_metrics_reduce=True)


def update_then_reduce(
    update: Callable[..., Any],
    before_reduce: Callable[[], None],
    metrics: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> Any:
    """A Learner's update (`update`: its parent's bound method) with its metrics left
    unreduced; then, unless the caller asked for no reduce, `before_reduce()` and the
    reduce RLlib's update would have ended with.

    Args:
        update: The parent class's `Learner.update`, bound.
        before_reduce: Called right before the reduce.
        metrics: The Learner's MetricsLogger.
        args: The update's positional arguments.
        kwargs: The update's keyword arguments, as the caller gave them.

    Returns:
        The reduced results, or None where the caller asked for no reduce.
    """
    reduce = not kwargs.pop("_no_metrics_reduce", False)
    update(*args, _no_metrics_reduce=True, **kwargs)
    if not reduce:
        return None
    before_reduce()
    return metrics.reduce()


# --- Learner learning rates -----------------------------------------------------------------


def torch_schedulers_own_lr(learner: Any) -> bool:
    """Whether torch LRSchedulers drive the Learner's optimizers (they own their lr)."""
    return bool(getattr(learner, "_lr_schedulers", None))


def optimizer_lr_schedules(learner: Any) -> dict[Any, Any]:
    """The lr Scheduler RLlib built from the Learner's config, by optimizer."""
    return dict(getattr(learner, "_optimizer_lr_schedules", {}) or {})


# --- a CPU Learner's gradient step -----------------------------------------------------------


def lean_cpu_steps(learner: Any) -> bool:
    """Makes a CPU Learner's gradient steps cheaper, the same steps; True if it did.

    RLlib's TorchLearner tests every gradient for NaN/inf twice and clips by global norm
    one tensor at a time, and its Adams step one tensor at a time: a third of a small
    network's update (docs/benchmarks.md). Here one total norm (the global-norm clip's,
    if any) tells whether every gradient is finite; if one is not, RLlib's own clip and
    step run (they zero it, with a warning). Adam steps fused (the same update). Left
    alone: a GPU Learner, grad scalers, torch LRSchedulers, `torch_skip_nan_gradients`."""
    import torch

    if learner._grad_scalers is not None or learner._lr_scheduler_classes is not None:
        return False
    if learner.config.torch_skip_nan_gradients:
        return False
    if any(p.device.type != "cpu" for p in learner._params.values()):
        return False
    fuse_adam(learner)
    rllib_clip, rllib_apply = learner._get_clip_function(), learner.apply_gradients
    seen = {"grads": 0, "finite": True}  # what this update's clipping saw

    def clip_gradients(gradients_dict: dict[Any, Any], *, grad_clip: Any, grad_clip_by: str) -> Any:
        grads = list(gradients_dict.values())
        if grad_clip_by != "global_norm" or not grads:
            seen["finite"] = False  # not checked here: apply_gradients checks
            return rllib_clip(gradients_dict, grad_clip=grad_clip, grad_clip_by=grad_clip_by)
        seen["grads"] += len(grads)
        total = torch.nn.utils.get_total_norm(grads)
        if not bool(torch.isfinite(total)):
            seen["finite"] = False
            return rllib_clip(gradients_dict, grad_clip=grad_clip, grad_clip_by=grad_clip_by)
        # RLlib's coefficient; at 1 (no clipping) its multiply changes nothing
        coeff = torch.clamp(grad_clip / torch.clamp(total + 1e-6, min=grad_clip), max=1.0)
        if bool(coeff < 1.0):
            for grad in grads:
                grad.detach().mul_(coeff)
        return total

    def apply_gradients(gradients_dict: dict[Any, Any]) -> None:
        checked = seen["finite"] and seen["grads"] == len(gradients_dict)
        seen.update(grads=0, finite=True)
        if not checked:
            grads = list(gradients_dict.values())
            total = torch.nn.utils.get_total_norm(grads) if grads else torch.zeros(())
            if not bool(torch.isfinite(total)):
                rllib_apply(gradients_dict)
                return
        for pid, grad in gradients_dict.items():
            learner._params[pid].grad = grad
        for module_id, names in learner._module_optimizers.items():
            for name in names:
                learner.get_optimizer(module_id, name).step()

    learner._get_clip_function = lambda: clip_gradients
    learner.apply_gradients = apply_gradients
    lean_target_updates(learner)
    return True


def polyak_average(pairs: list[tuple[Any, Any]], tau: float) -> None:
    """Each target net of `pairs` (main, target) becomes `tau * main + (1 - tau) *
    target`, as RLlib's update_target_network computes it (the same values bit for bit),
    written into the target's tensors in place: without RLlib's new state dict and its
    load_state_dict per pair (0.6 of RLlib's time on SAC's nets)."""
    import torch

    with torch.no_grad():
        for main, target in pairs:
            main_state = main.state_dict()
            for key, value in target.state_dict().items():
                value.copy_(tau * main_state[key] + (1 - tau) * value)


def lean_target_updates(learner: Any) -> bool:
    """DQN's and SAC's target-network update (DQNLearner.after_gradient_based_update)
    with its Polyak averages written into the targets in place; True if installed.

    RLlib builds a new state dict per pair and loads it back: for SAC, which updates its
    four target pairs after every update, 9 % of a trial's time (docs/benchmarks.md).
    Here `polyak_average`: the same values bit for bit, on the same schedule
    (`target_network_update_freq`), with the same metrics."""
    from ray.rllib.algorithms.dqn.dqn_learner import DQNLearner
    from ray.rllib.core.rl_module.apis import TargetNetworkAPI
    from ray.rllib.utils.metrics import (
        LAST_TARGET_UPDATE_TS,
        NUM_ENV_STEPS_SAMPLED_LIFETIME,
        NUM_TARGET_UPDATES,
    )

    if not isinstance(learner, DQNLearner):
        return False
    if type(learner).after_gradient_based_update is not DQNLearner.after_gradient_based_update:
        return False  # a subclass with its own: RLlib's path
    base = super(DQNLearner, learner).after_gradient_based_update

    def after_gradient_based_update(*, timesteps: dict[str, Any]) -> None:
        base(timesteps=timesteps)
        timestep = timesteps.get(NUM_ENV_STEPS_SAMPLED_LIFETIME, 0)
        for module_id, module in learner.module.items():
            config = learner.config.get_config_for_module(module_id)
            unwrapped = module.unwrapped()
            since = timestep - learner.last_update_ts_by_mid[module_id]
            if since >= config.target_network_update_freq and isinstance(
                unwrapped, TargetNetworkAPI
            ):
                polyak_average(list(unwrapped.get_target_network_pairs()), config.tau)
                learner.metrics.log_value((module_id, NUM_TARGET_UPDATES), 1, reduce="lifetime_sum")
                learner.last_update_ts_by_mid[module_id] = timestep
                learner.metrics.log_value(
                    (module_id, LAST_TARGET_UPDATE_TS), timestep, reduce="max"
                )

    learner.after_gradient_based_update = after_gradient_based_update
    return True


def fuse_adam(learner: Any) -> None:
    """Every torch Adam of the Learner steps with the fused kernel (again after a
    checkpoint's optimizer state put its own param_groups over them)."""
    import torch

    for module_id in list(learner.module.keys()):
        for _, optimizer in learner.get_optimizers_for_module(module_id):
            if type(optimizer) is torch.optim.Adam:
                for group in optimizer.param_groups:
                    if not group.get("differentiable"):
                        group.update(fused=True, foreach=None)


def learner_compile_skips_modules(source: str | None = None) -> bool:
    """Whether the installed RLlib's `torch_compile_learner` (what to compile:
    forward_train) compiles no module on the new API stack.

    RLlib 2.60's TorchLearner.build loops over the MultiRLModule's modules but tests the
    MultiRLModule, not the module, for TorchRLModule, so nothing is compiled (0 graphs in
    bench/torch_compile.py). Read from the installed source (or `source`, that method's
    text): a fixed RLlib says False."""
    import inspect
    import re

    if source is None:
        from ray.rllib.core.learner.torch.torch_learner import TorchLearner

        source = inspect.getsource(TorchLearner.build)
    loop = r"for module in self\.\w+\.\w+\.values\(\):"
    test = r"(?:\s*#[^\n]*)*\s*if isinstance\(self\.\w+, TorchRLModule\):\s*module\.compile\("
    return re.search(loop + test, source) is not None


# --- the end of a training iteration --------------------------------------------------------


class IterationEndHook:
    """Mixin for an Algorithm: `tuner_iteration_end()` runs after a training iteration's
    last `training_step`, right before RLlib's private iteration loop (which its step
    runs with and without parallel evaluation) compiles the iteration's results."""

    def _run_one_training_iteration(self) -> Any:
        metrics = self.metrics  # type: ignore[attr-defined]
        compile_results = metrics.compile

        def compile_after_the_hook(*args: Any, **kwargs: Any) -> Any:
            self.tuner_iteration_end()  # type: ignore[attr-defined]
            return compile_results(*args, **kwargs)

        metrics.compile = compile_after_the_hook
        try:
            return super()._run_one_training_iteration()  # type: ignore[misc]
        finally:
            metrics.__dict__.pop("compile", None)


# --- SAC's catalog --------------------------------------------------------------------------


class QEncoderHook:
    """Mixin for a SACCatalog subclass: RLlib's private Q-encoder builder calls the
    subclass's `tuner_q_encoder(framework, rllib_default)`."""

    def _build_qf_encoder_continuous(self, framework: str) -> Any:
        return self.tuner_q_encoder(  # type: ignore[attr-defined]
            framework,
            super()._build_qf_encoder_continuous,  # type: ignore[misc]
        )


def catalog_model_config(catalog: Any) -> dict[str, Any]:
    """The model_config a Catalog was built with."""
    return catalog._model_config_dict


# --- Tune -----------------------------------------------------------------------------------


class PB2ConfigHook:
    """Mixin for a PB2 subclass: Tune's private new-config builder calls the subclass's
    `tuner_new_config(trial, trial_to_clone, tune_default)`."""

    def _get_new_config(self, trial: Any, trial_to_clone: Any) -> tuple[dict, dict]:
        return self.tuner_new_config(  # type: ignore[attr-defined]
            trial,
            trial_to_clone,
            super()._get_new_config,  # type: ignore[misc]
        )


def pb2_bounded_keys(pb2: Any) -> list[str]:
    """The keys a PB2 scheduler perturbs."""
    return list(pb2._hyperparam_bounds)


def set_restored_callbacks(tuner: Any, callbacks: list[Any]) -> None:
    """Replaces the callbacks of a Tuner restored from its pickled state."""
    tuner._local_tuner._run_config.callbacks = list(callbacks)


def result_grid_trials(result_grid: Any) -> list[Any]:
    """The Trial objects behind a ResultGrid (their status, id, error)."""
    analysis = getattr(result_grid, "_experiment_analysis", None)
    return list(getattr(analysis, "trials", None) or [])


__all__ = [
    "IterationEndHook",
    "forget_pending_decisions",
    "MODEL_CONFIG_KEY",
    "PRIVATE_NAMES",
    "RL_MODULE_SPEC_KEY",
    "LocalReplayBufferHook",
    "PB2ConfigHook",
    "PrivateName",
    "QEncoderHook",
    "catalog_model_config",
    "config_key",
    "has_own_connectors",
    "module_is_stateful",
    "no_prestarted_workers",
    "optimizer_lr_schedules",
    "pb2_bounded_keys",
    "read_private_names",
    "rebuild_in_place",
    "result_grid_trials",
    "sample_env_runners",
    "set_restored_callbacks",
    "torch_schedulers_own_lr",
    "update_then_reduce",
    "update_unreduced",
]


# decisions of a live TuneController about in-flight saves and results, which Tune 2.60
# also writes into the experiment state's runner_data
_PENDING_DECISIONS = ("_cached_trial_decisions", "_queued_trial_decisions")


def forget_pending_decisions(experiment_path: str) -> int:
    """Drops, from every experiment state file of a Tune run at `experiment_path` (a
    local path or a pyarrow URI), the decisions its controller had pending on saves and
    results in flight. None of those is in flight after a restart; left in, a trial that
    failed while saving is stopped after the first iteration of its retry. Returns how
    many decisions were dropped."""
    import json

    import pyarrow.fs as pafs

    if "://" in experiment_path:
        fs, base = pafs.FileSystem.from_uri(experiment_path)
    else:
        fs, base = pafs.LocalFileSystem(), experiment_path
    selector = pafs.FileSelector(base, allow_not_found=True)
    dropped = 0
    for info in fs.get_file_info(selector):
        if not (info.base_name.startswith("experiment_state") and info.base_name.endswith(".json")):
            continue
        with fs.open_input_stream(info.path) as f:
            state = json.loads(f.read())
        runner = state.get("runner_data") or {}
        pending = sum(len(runner.get(k) or {}) for k in _PENDING_DECISIONS)
        if not pending:
            continue
        for key in _PENDING_DECISIONS:
            if key in runner:
                runner[key] = {}
        with fs.open_output_stream(info.path) as f:
            f.write(json.dumps(state).encode())
        dropped += pending
    return dropped
