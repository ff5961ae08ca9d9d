"""RLlib's Learner's and LearnerGroup's private names: its update (one batch, lean
minibatches, metrics left unreduced), its learning rates, a CPU Learner's gradient step
and the target-network update."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

# The sha256 of DQNLearner.after_gradient_based_update's source in the Ray the lean
# target update (lean_target_updates) was ported from (2.60).
TARGET_UPDATE_SOURCE = "112cd41c8b490f39d5f54ea5efb18f5e32bd647c71409836cdca778566d0b876"
# The same for Learner.update, whose one-batch path `single_batch_update` follows.
LEARNER_UPDATE_SOURCE = "3881ea9242770af1f42fd8c9e17fc9d23941bbd0044f21b2ff78afc4ec3ff06c"
# The same for TorchLearner._uncompiled_update, whose steps `lean_torch_update` takes.
TORCH_UPDATE_SOURCE = "ecbe85f6afc95394c37cf6e55188b233ce8cc36c144e1cc709fc34daed2fc1e8"


# --- a Learner's update ----------------------------------------------------------------------


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
    lean = getattr(learner, "tuner_lean_update", None)
    result = lean(batch.policy_batches) if lean is not None else None
    _, loss_per_module, _ = result if result is not None else learner._update(batch.policy_batches)
    learner._log_steps_trained_metrics(batch)
    for module_id, loss in loss_per_module.items():
        learner.metrics.log_value(key=(module_id, learner.TOTAL_LOSS_KEY), value=loss, window=1)
    learner.after_gradient_based_update(timesteps=timesteps)


def lean_torch_update(
    learner: Any, batch: dict[Any, Any], forward_train: Callable[[dict[Any, Any]], Any]
) -> tuple[Any, Any, dict[str, Any]]:
    """TorchLearner._uncompiled_update (RLlib 2.60) of a Learner with one local copy
    (no DDP), its forward pass `forward_train(batch)` in place of the module's: the same
    steps in the same order (the off-policyness, the forward, the losses, the gradients,
    their postprocessing and application).

    Args:
        learner: A torch Learner, built, not compiled, `num_learners` at most 1.
        batch: The update's module batches, by module ID.
        forward_train: What the module's `forward_train(batch)` returns, computed leanly.

    Returns:
        (forward outputs, losses by module, {}), as `_update` returns them.
    """
    learner._compute_off_policyness(batch)
    fwd_out = forward_train(batch)
    loss_per_module = learner.compute_losses(fwd_out=fwd_out, batch=batch)
    gradients = learner.compute_gradients(loss_per_module)
    learner.apply_gradients(learner.postprocess_gradients(gradients))
    return fwd_out, loss_per_module, {}


class DeferredOffPolicyness:
    """Mixin for a torch Learner: while deferred, TorchLearner's per-minibatch
    off-policyness (`_compute_off_policyness`, logged with window=1, so only the last
    minibatch's is reported) keeps its batch, and `tuner_log_off_policyness` computes it
    once, for the last minibatch: the same value (the weights' seq no is one per update,
    the batch unchanged), not one small computation per minibatch."""

    def tuner_defer_off_policyness(self, defer: bool) -> None:
        """Defers (or no longer defers) the off-policyness of each minibatch.

        Args:
            defer: Whether to keep the batch instead of computing.
        """
        self.__dict__["tuner_deferring_off_policyness"] = defer
        if not defer:
            self.__dict__.pop("tuner_off_policy_batch", None)

    def _compute_off_policyness(self, batch: Any) -> None:
        if self.__dict__.get("tuner_deferring_off_policyness"):
            self.__dict__["tuner_off_policy_batch"] = batch
            return
        super()._compute_off_policyness(batch)  # type: ignore[misc]

    def tuner_log_off_policyness(self) -> None:
        """Computes and logs the kept (last) minibatch's off-policyness, as RLlib would
        have for it."""
        batch = self.__dict__.pop("tuner_off_policy_batch", None)
        if batch is not None:
            super()._compute_off_policyness(batch)  # type: ignore[misc]


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
    """One learner update whose metrics are left unreduced (the next reduce takes them).

    A local Learner is called directly with the batch, as LearnerGroup.update calls it
    after wrapping the batch in a TrainingData (nothing to validate or resolve for one
    MultiAgentBatch), without that wrapping and the group's two Prometheus timers: two
    percent of a small DQN trial's time."""
    if learner_group.is_local:
        learner_group._learner.update(batch=batch, timesteps=timesteps, _no_metrics_reduce=True)
        return
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


# --- a CPU Learner's gradient step, the target-network update, torch.compile -----------------


def lean_cpu_steps(learner: Any) -> bool:
    """Makes a CPU Learner's gradient steps cheaper, the same steps; True if it did.

    RLlib's TorchLearner tests every gradient for NaN/inf twice and clips by global norm
    one tensor at a time, and its Adams step one tensor at a time: a third of a small
    network's update (docs/benchmarks.md). Here one total norm (the global-norm clip's,
    if any), read once, tells whether every gradient is finite; if one is not, RLlib's
    own clip and step run (they zero it, with a warning). The same read skips RLlib's
    coefficient (four tensor ops) where the norm is well under the clip and the
    coefficient there is exactly 1 (checked once per grad_clip). Adam steps fused (the
    same update). Left alone: a GPU Learner, grad scalers, torch LRSchedulers,
    `torch_skip_nan_gradients`."""
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
    unit_under: dict[float, bool] = {}  # by grad_clip: RLlib's coefficient under it is 1

    def rllib_coeff(total: Any, grad_clip: Any) -> Any:
        return torch.clamp(grad_clip / torch.clamp(total + 1e-6, min=grad_clip), max=1.0)

    def clip_gradients(gradients_dict: dict[Any, Any], *, grad_clip: Any, grad_clip_by: str) -> Any:
        grads = list(gradients_dict.values())
        if grad_clip_by != "global_norm" or not grads:
            seen["finite"] = False  # not checked here: apply_gradients checks
            return rllib_clip(gradients_dict, grad_clip=grad_clip, grad_clip_by=grad_clip_by)
        seen["grads"] += len(grads)
        total = torch.nn.utils.get_total_norm(grads)
        norm = total.item()  # one read: finite, and clipping at all (most updates: not)
        if not math.isfinite(norm):
            seen["finite"] = False
            return rllib_clip(gradients_dict, grad_clip=grad_clip, grad_clip_by=grad_clip_by)
        if norm + 1e-6 < grad_clip * (1 - 1e-5):
            # under the clip RLlib's coefficient is one constant per grad_clip: exactly 1
            # for most (then its multiply changes nothing), one float32 step below 1 for
            # some (41, 0.99: then it scales, as RLlib's does)
            unit = unit_under.get(grad_clip)
            if unit is None:
                unit = unit_under[grad_clip] = bool(rllib_coeff(torch.zeros(()), grad_clip) == 1)
            if unit:
                return total
        coeff = rllib_coeff(total, grad_clip)
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


def zero_grads_to_none(optimizer: Any, set_to_none: bool = True) -> None:
    """torch's `Optimizer.zero_grad(set_to_none=True)`: every gradient set to None, without
    its dynamo guard and profiler range (a tenth of a small DQN update's Python time)."""
    if not set_to_none:
        type(optimizer).zero_grad(optimizer, set_to_none)
        return
    for group in optimizer.param_groups:
        for param in group["params"]:
            if param.grad is not None:
                param.grad = None


def fuse_adam(learner: Any) -> None:
    """Every torch Adam of the Learner steps with the fused kernel (again after a
    checkpoint's optimizer state put its own param_groups over them), its gradients set
    to None without torch's per-call guards (`zero_grads_to_none`)."""
    import functools

    import torch

    for module_id in list(learner.module.keys()):
        for _, optimizer in learner.get_optimizers_for_module(module_id):
            if type(optimizer) is torch.optim.Adam:
                for group in optimizer.param_groups:
                    if not group.get("differentiable"):
                        group.update(fused=True, foreach=None)
                optimizer.zero_grad = functools.partial(zero_grads_to_none, optimizer)


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
