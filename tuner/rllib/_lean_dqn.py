"""DQN's loss as RLlib's DQNTorchLearner computes it, without its per-update overhead.

RLlib 2.60's `compute_loss_for_module` builds a fresh `nn.HuberLoss` (or `nn.MSELoss`)
module for every update and logs five window=1 stats one by one (each a log call and a
tensor copy in the Learner's recorder) plus the TD errors as an item series. Here the
same tensor ops run in the same order on the same inputs, so the loss, its gradients and
every reported stat are RLlib's bit for bit (tests/unit/test_lean_metrics.py, update by
update); the loss function is called as a function (what the module's forward calls),
the five stats are stacked into one tensor and logged as one row of a `MetricsRecorder`
group (the same per-key means at the flush), and the TD errors are computed but not
logged where the flat path's uniform buffer dropped them. Three ops differ, not their
values: without double Q the target's argmax-and-gather is its max (the same element);
the stats' min and max are one `aminmax`; the stats and TD errors are computed without
an autograd graph (they are logged detached).

Covered: a scalar Q-head (`num_atoms: 1`), with or without double Q, Huber or MSE, no
loss mask (no sequences). A distributional head or a masked batch runs RLlib's own loss.

The forward pass of a double-Q update (`tuner_lean_update`, called by
ray_internals.single_batch_update on the flat replay path): RLlib's `_forward_train`
runs the online network once on the observations and the next observations stacked, with
an autograd graph for both halves, though its loss reads the next half only through an
argmax; the backward pass then multiplies out the zero gradients of that half, the
learner's largest matrix products at twice the rows (a LunarLander update of batch 128 on
[256, 256]: about a sixth of it). Here the online network runs on the observations with
the graph, on the next observations without it, and the target network without it (its
parameters need no gradient): the same values row for row (a row's product does not
depend on the rows beside it), so the same loss, gradients and weights
(tests/unit/test_lean_dqn_forward.py, update by update). Covered: RLlib's own DQN torch module
(`DefaultDQNTorchRLModule`) with double Q and a scalar head, stateless, on a Learner with
one local copy and no compiled update; anything else runs RLlib's forward pass.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from ray.rllib.algorithms.dqn.dqn_learner import (
    QF_LOSS_KEY,
    QF_MAX_KEY,
    QF_MEAN_KEY,
    QF_MIN_KEY,
    QF_NEXT_PREDS,
    QF_PREDS,
    QF_TARGET_NEXT_PREDS,
    TD_ERROR_MEAN_KEY,
)
from ray.rllib.algorithms.dqn.torch.default_dqn_torch_rl_module import DefaultDQNTorchRLModule
from ray.rllib.core.columns import Columns
from ray.rllib.utils.metrics import TD_ERROR_KEY

from tuner.ray_internals import lean_torch_update

# the window=1 stats RLlib's loss logs per update, in its order
STAT_NAMES = (QF_LOSS_KEY, QF_MEAN_KEY, QF_MAX_KEY, QF_MIN_KEY, TD_ERROR_MEAN_KEY)
# The sha256 of each RLlib 2.60 source the lean forward pass computes as RLlib does, by
# "Class.method": a Ray whose code changed fails tests/unit/test_lean_dqn_forward.py until it is
# checked again (RLModule.forward_train and TorchRLModule.forward_train: _lean_sac.py's).
RLLIB_SOURCES = {
    "DefaultDQNTorchRLModule._forward_train": (
        "fc91c8e47e68ad8f4a2d2efbabca30e273b91956fc189bb74790a45489fc4b78"
    ),
    "DefaultDQNTorchRLModule._qf_forward_helper": (
        "1efe0f23946808dec2f1535c22196e3356e884c8175547b4b4034dfcd40b83ab"
    ),
    "DefaultDQNRLModule.compute_q_values": (
        "6a7226c4aa0cc319ff14b0b76f10d11471c69fdbae9a82fff6b34f6e7f4ed355"
    ),
    "DefaultDQNRLModule.forward_target": (
        "7d67ca83e5d89c5b1a6c1dccd041b975cc7fb344fdc3177a692f1f8107942135"
    ),
}
# where each class of RLLIB_SOURCES lives
RLLIB_MODULES = {
    "DefaultDQNTorchRLModule": "ray.rllib.algorithms.dqn.torch.default_dqn_torch_rl_module",
    "DefaultDQNRLModule": "ray.rllib.algorithms.dqn.default_dqn_rl_module",
}


def lean_dqn_loss_covers(config: Any, batch: dict[str, Any]) -> bool:
    """Whether the lean loss computes RLlib's for this module config and batch.

    Args:
        config: The module's DQN config.
        batch: The module's train batch.

    Returns:
        True for a scalar Q-head on an unmasked batch.
    """
    return config.num_atoms == 1 and Columns.LOSS_MASK not in batch


def dqn_td_loss(
    config: Any, batch: dict[str, Any], fwd_out: dict[str, Any]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """RLlib 2.60's scalar DQN loss: the same ops, in the same order.

    Args:
        config: The module's DQN config.
        batch: The module's train batch (unmasked).
        fwd_out: The module's forward_train output.

    Returns:
        The total loss, the Q-values of the taken actions and the absolute TD errors.
    """
    q_curr = fwd_out[QF_PREDS]
    q_target_next = fwd_out[QF_TARGET_NEXT_PREDS]
    actions = batch[Columns.ACTIONS]
    q_selected = torch.nan_to_num(
        torch.gather(q_curr, dim=-1, index=actions.view(*actions.shape, 1).long()),
        neginf=0.0,
    ).squeeze(dim=-1)
    if config.double_q:  # the target net's value at the online net's greedy next action
        best_idx = torch.argmax(fwd_out[QF_NEXT_PREDS], dim=-1).unsqueeze(dim=-1).long()
        q_next_best = torch.nan_to_num(
            torch.gather(q_target_next, dim=-1, index=best_idx), neginf=0.0
        ).squeeze()
    else:  # the element RLlib's argmax and gather pick (a NaN's index: NaN, then 0)
        q_next_best = torch.nan_to_num(torch.amax(q_target_next, dim=-1), neginf=0.0)
    q_next_best_masked = (1.0 - batch[Columns.TERMINATEDS].float()) * q_next_best
    discount = config.gamma ** batch["n_step"]
    target = (batch[Columns.REWARDS] + discount * q_next_best_masked).detach()
    if config.td_error_loss_fn == "huber":
        per_sample = torch.nn.functional.huber_loss(q_selected, target, reduction="none", delta=1.0)
    else:
        per_sample = torch.nn.functional.mse_loss(q_selected, target, reduction="none")
    total_loss = torch.mean(batch["weights"] * per_sample)
    with torch.no_grad():  # stats and priorities only: no graph
        td_error = torch.abs(q_selected - target)
    return total_loss, q_selected, td_error


def lean_dqn_module(learner: Any, module_id: Any) -> Any:
    """The module the lean forward pass covers, else None.

    Args:
        learner: A DQN torch Learner.
        module_id: The module's ID.

    Returns:
        RLlib's own DQN torch module with double Q and a scalar head, on a Learner with
        one local copy and no compiled update; else None (a batch with states is
        refused by `tuner_lean_update`).
    """
    config = learner.config
    if config.num_learners > 1 or config.torch_compile_learner:
        return None
    module = learner.module[module_id]
    if type(module) is not DefaultDQNTorchRLModule or module.inference_only:
        return None
    return module if module.uses_double_q and module.num_atoms == 1 else None


def dqn_forward_train(module: Any, batch: dict[str, Any]) -> dict[str, Any]:
    """RLlib 2.60's double-Q forward_train of a scalar head, the next observations'
    passes without an autograd graph: the same outputs.

    Args:
        module: RLlib's DQN torch module (double Q, scalar head).
        batch: Its train batch, stateless.

    Returns:
        The Q-values, the online net's of the next observations and the target net's.
    """
    module.train()  # as RLlib's forward_train (_lean_modes.py: at once where it is)
    next_obs = {Columns.OBS: batch[Columns.NEXT_OBS]}
    output = {QF_PREDS: module.compute_q_values({Columns.OBS: batch[Columns.OBS]})[QF_PREDS]}
    with torch.no_grad():  # read through an argmax and as the target: no gradient
        output[QF_NEXT_PREDS] = module.compute_q_values(next_obs)[QF_PREDS]
        output[QF_TARGET_NEXT_PREDS] = module.forward_target(next_obs)[QF_PREDS]
    return output


def lean_module_update(
    learner: Any,
    batch: dict[Any, Any],
    covered: Callable[[Any, Any], Any],
    forward: Callable[[Any, dict[str, Any]], dict[str, Any]],
) -> Any:
    """A one-batch update whose forward pass is `forward(module, module_batch)` for each
    module, where `covered(learner, module_id)` gives every one; else None.

    Args:
        learner: A torch Learner (the lean DQN or SAC one).
        batch: The update's module batches, by module ID.
        covered: The module a lean forward pass covers, else None.
        forward: The lean forward pass of one module.

    Returns:
        What TorchLearner's `_update` returns, or None (then RLlib's update runs).
    """
    modules = {mid: covered(learner, mid) for mid in batch}
    if any(module is None for module in modules.values()):
        return None

    def forward_train(module_batches: dict[Any, Any]) -> dict[Any, Any]:
        return {mid: forward(modules[mid], b) for mid, b in module_batches.items()}

    return lean_torch_update(learner, batch, forward_train)


def log_loss_stats(
    metrics: Any,
    module_id: Any,
    names: tuple[str, ...],
    stats: tuple[torch.Tensor, ...] | list[torch.Tensor],
    td_error: torch.Tensor,
) -> None:
    """Logs a lean loss's TD errors (an item series) and its window=1 stats as RLlib's
    loss logs them: to the real MetricsLogger call by call, to an update's
    MetricsRecorder as one row (the TD errors only where it keeps them).

    Args:
        metrics: The Learner's MetricsLogger, or the MetricsRecorder of its update.
        module_id: The module's ID (the stats' key prefix).
        names: The stats' names, in RLlib's order.
        stats: Their values, 0-d tensors, detached.
        td_error: The absolute TD errors, detached.
    """
    log_row = getattr(metrics, "log_row", None)
    if log_row is None:  # the real MetricsLogger (outside a recorded update)
        metrics.log_value(key=(module_id, TD_ERROR_KEY), value=td_error, reduce="item_series")
        metrics.log_dict(dict(zip(names, stats, strict=True)), key=module_id, window=1)
        return
    if TD_ERROR_KEY not in metrics.drop:
        metrics.log_value(key=(module_id, TD_ERROR_KEY), value=td_error, reduce="item_series")
    with torch.no_grad():
        log_row(module_id, names, torch.stack(list(stats)))


class LeanDQNLoss:
    """Mixin for DQNTorchLearner: its loss computed and logged leanly where it covers
    the config and batch (`lean_dqn_loss_covers`), RLlib's own otherwise; a double-Q
    update's forward pass without the next observations' graph (`lean_dqn_module`)."""

    def tuner_lean_update(self, batch: dict[Any, Any]) -> Any:
        """The one-batch update with the lean forward pass, or None where it does not
        cover the modules or the batch (then RLlib's runs).

        Args:
            batch: The update's module batches, by module ID.

        Returns:
            What TorchLearner's `_update` returns, or None.
        """
        if any(Columns.STATE_IN in module_batch for module_batch in batch.values()):
            return None
        return lean_module_update(self, batch, lean_dqn_module, dqn_forward_train)

    def compute_loss_for_module(
        self, *, module_id: Any, config: Any, batch: dict[str, Any], fwd_out: dict[str, Any]
    ) -> Any:
        """RLlib's DQN loss and logged stats, the same values.

        Args:
            module_id: The module's ID.
            config: The module's DQN config.
            batch: The module's train batch.
            fwd_out: The module's forward_train output.

        Returns:
            The total loss.
        """
        if not lean_dqn_loss_covers(config, batch):
            return super().compute_loss_for_module(  # type: ignore[misc]
                module_id=module_id, config=config, batch=batch, fwd_out=fwd_out
            )
        total_loss, q_selected, td_error = dqn_td_loss(config, batch, fwd_out)
        metrics = self.metrics  # type: ignore[attr-defined]
        with torch.no_grad():  # the values RLlib logs (detached), without their graph
            q_min, q_max = torch.aminmax(q_selected)
            stats = (total_loss, torch.mean(q_selected), q_max, q_min, torch.mean(td_error))
        log_loss_stats(metrics, module_id, STAT_NAMES, stats, td_error)
        return total_loss
