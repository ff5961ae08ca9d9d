"""SAC's update as RLlib's computes it, without its per-update overhead: the same values.

RLlib 2.60's continuous SAC update sets the whole module to train mode (sixty module
calls), records an autograd graph for the next state's policy pass and the target
Q-values it then detaches, computes eleven window=1 stats in the graph and logs them one
by one, and runs four backward passes (one per optimizer: Q, twin Q, policy, alpha),
each zeroing its optimizer first. Here, on the one-batch update of the flat replay path
(`tuner_lean_update`, called by ray_internals.single_batch_update):

- the forward pass is RLlib's (`DefaultSACTorchRLModule._forward_train_continuous`) op
  for op, in its order (the same random draws), with the next state's policy pass and
  the target Q-values under `no_grad` (RLlib detaches both), and train mode set only
  where the module is not in it;
- the loss is RLlib's (`_compute_loss_for_module_continuous`) op for op; its stats are
  computed without a graph and kept as one row (the DQN loss's way, _lean_dqn.py);
- one backward pass of the sum of the four losses. Each loss reaches only its own
  optimizer's parameters (the critics' targets are detached; the policy loss's
  Q-values are computed with the critics' parameters frozen, as RLlib computes them;
  the alpha loss's log-probabilities are detached), and a sum passes each loss the
  gradient 1, so every gradient is RLlib's bit for bit
  (tests/unit/test_lean_sac.py, update by update).

Covered: one module (single agent), RLlib's own SAC torch module
(`DefaultSACTorchRLModule`, our Q-encoder catalog or RLlib's), Box actions, a Learner
with one local copy and no compiled update. Anything else (discrete actions, several
modules, a custom module, remote or several Learners, torch.compile) runs RLlib's own
update and loss. A numpy batch (RLlib's own update) takes the lean loss and backward
pass, RLlib's forward pass.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import torch
from ray.rllib.algorithms.sac.sac_learner import (
    LOGPS_KEY,
    QF_LOSS_KEY,
    QF_MAX_KEY,
    QF_MEAN_KEY,
    QF_MIN_KEY,
    QF_PREDS,
    QF_TWIN_LOSS_KEY,
    QF_TWIN_PREDS,
    TD_ERROR_MEAN_KEY,
)
from ray.rllib.algorithms.sac.torch.default_sac_torch_rl_module import DefaultSACTorchRLModule
from ray.rllib.core.columns import Columns
from ray.rllib.core.learner.learner import POLICY_LOSS_KEY
from ray.rllib.core.models.base import ENCODER_OUT
from ray.rllib.utils.metrics import ALL_MODULES

from tuner.rllib._lean_dqn import lean_module_update, log_loss_stats

# the window=1 stats RLlib's loss logs per update, in its order (the twin loss last)
STAT_NAMES = (
    POLICY_LOSS_KEY,
    QF_LOSS_KEY,
    "alpha_loss",
    "alpha_value",
    "log_alpha_value",
    "target_entropy",
    LOGPS_KEY,
    QF_MEAN_KEY,
    QF_MAX_KEY,
    QF_MIN_KEY,
    TD_ERROR_MEAN_KEY,
)
# The sha256 of each RLlib 2.60 source this module computes as RLlib does, or relies on
# (one optimizer per loss, over disjoint parameters), by "Class.method": a Ray
# whose code changed fails tests/unit/test_lean_sac.py until it is checked again.
RLLIB_SOURCES = {
    "DefaultSACTorchRLModule._forward_train": (
        "f4a6a88dbca29cd88e95792308a3163b7369dbb862b0854a8df4cfb5ca1121e8"
    ),
    "DefaultSACTorchRLModule._forward_train_continuous": (
        "4ad2586cf6700687ea5633f22f931426831fbd9957fd1b75536a98d6e05736f3"
    ),
    "DefaultSACTorchRLModule._qf_forward_train_helper": (
        "4b957cd27db81662a61384bd891bd44ec61483d994bf75e9aa4716f262f1e2ae"
    ),
    "DefaultSACTorchRLModule.compute_q_values": (
        "13465b0412e7b38863237781e927d0372f9392dd55eb244b891e9577273de680"
    ),
    "DefaultSACTorchRLModule.forward_target": (
        "02e529211d8cd3c64a293c46428220eabc01eeef85912fc1d318fd8c208357e7"
    ),
    "TorchRLModule.forward_train": (
        "a46fd3d6beb0842923ece169d6cd8630e400d7023b2280724c62b17e8b166c09"
    ),
    "RLModule.forward_train": "7a7159035dccc09e0a1c4d90f6bb8b2db70c50ccd5c380e0fa22ba970362a206",
    "SACTorchLearner.compute_loss_for_module": (
        "ebfc18f8fdd4bbb7c453d9c957573b3c59f64735517c36c0f64defccb0b9cb7a"
    ),
    "SACTorchLearner._compute_loss_for_module_continuous": (
        "9a5a9ffdbe23c71590432e585e9230ed82874ad579fc76ef0898383d332f0e70"
    ),
    "SACTorchLearner.compute_gradients": (
        "4bdcde0470e4c6082a5bea7ba9d5f7ba6431254758f65f16299319ad803ac6bf"
    ),
    "SACTorchLearner.configure_optimizers_for_module": (
        "09211f06cf708ff18656c37f37e553c9128f2b0de14289a2d88f356159fddfc6"
    ),
}
# where each class of RLLIB_SOURCES lives
RLLIB_MODULES = {
    "DefaultSACTorchRLModule": "ray.rllib.algorithms.sac.torch.default_sac_torch_rl_module",
    "TorchRLModule": "ray.rllib.core.rl_module.torch.torch_rl_module",
    "RLModule": "ray.rllib.core.rl_module.rl_module",
    "SACTorchLearner": "ray.rllib.algorithms.sac.torch.sac_torch_learner",
}
LOSSES = "_tuner_sac_losses"  # the Learner's __dict__ key: this update's losses by module


def lean_sac_module(learner: Any, module_id: Any) -> Any:
    """The module the lean SAC loss and forward pass cover, else None.

    Args:
        learner: A SAC torch Learner.
        module_id: The module's ID.

    Returns:
        RLlib's own SAC torch module with Box actions, the Learner's only one, on a
        Learner with one local copy and no compiled update; else None.
    """
    config = learner.config
    if config.num_learners > 1 or config.torch_compile_learner:
        return None
    if len(learner.module.keys()) != 1:
        return None
    module = learner.module[module_id]
    if type(module) is not DefaultSACTorchRLModule or module.inference_only:
        return None
    return module if isinstance(module.action_space, gym.spaces.Box) else None


def q_values(encoder: Any, head: Any, obs: Any, actions: Any) -> torch.Tensor:
    """A Q-network's values of (obs, actions), squeezed (RLlib's `_qf_forward_train_helper`)."""
    return head(encoder({Columns.OBS: obs, Columns.ACTIONS: actions})[ENCODER_OUT]).squeeze(-1)


def sac_forward_train(module: Any, batch: dict[str, Any]) -> dict[str, Any]:
    """RLlib 2.60's continuous SAC forward_train: the same outputs, ops and random draws.

    Args:
        module: RLlib's SAC torch module (Box actions).
        batch: Its train batch.

    Returns:
        The outputs RLlib's loss reads (Q-values, log-probabilities, targets).
    """
    module.train()  # as RLlib's forward_train (_lean_modes.py: at once where it is)
    obs, next_obs = batch[Columns.OBS], batch[Columns.NEXT_OBS]
    encoded = module.pi_encoder({Columns.OBS: obs})[ENCODER_OUT]
    with torch.no_grad():  # RLlib detaches everything of the next state
        encoded_next = module.pi_encoder({Columns.OBS: next_obs})[ENCODER_OUT]
    output = {QF_PREDS: q_values(module.qf_encoder, module.qf, obs, batch[Columns.ACTIONS])}
    if module.twin_q:
        output[QF_TWIN_PREDS] = q_values(
            module.qf_twin_encoder, module.qf_twin, obs, batch[Columns.ACTIONS]
        )
    logits = module.pi(encoded)
    with torch.no_grad():
        logits_next = module.pi(encoded_next)
    dist_class = module.get_train_action_dist_cls()
    actions, output["logp_resampled"] = dist_class.from_logits(logits).rsample_and_logp()
    with torch.no_grad():
        actions_next, output["logp_next_resampled"] = dist_class.from_logits(
            logits_next
        ).sample_and_logp()
    critics = [module.qf, module.qf_encoder]
    if module.twin_q:
        critics += [module.qf_twin, module.qf_twin_encoder]
    params = [p for net in critics for p in net.parameters()]
    for param in params:  # the policy's gradient through the critics, not theirs
        param.requires_grad = False
    output["q_curr"] = module.compute_q_values({Columns.OBS: obs, Columns.ACTIONS: actions})
    for param in params:
        param.requires_grad = True
    with torch.no_grad():
        output["q_target_next"] = module.forward_target(
            {Columns.OBS: next_obs, Columns.ACTIONS: actions_next}
        )
    return output


def sac_losses(
    learner: Any, module_id: Any, config: Any, batch: dict[str, Any], fwd_out: dict[str, Any]
) -> tuple[dict[str, torch.Tensor], list[torch.Tensor], torch.Tensor]:
    """RLlib 2.60's continuous SAC losses: the same ops, in the same order.

    Returns:
        (the losses by name, the stats RLlib logs, in its order, the absolute TD errors).
    """
    log_alpha = learner.curr_log_alpha[module_id]
    alpha = torch.exp(log_alpha)
    q_target_next = fwd_out["q_target_next"] - alpha.detach() * fwd_out["logp_next_resampled"]
    q_next_masked = (1.0 - batch[Columns.TERMINATEDS].float()) * q_target_next
    target = (batch[Columns.REWARDS] + (config.gamma ** batch["n_step"]) * q_next_masked).detach()
    weights = batch["weights"]
    huber = torch.nn.functional.huber_loss
    losses = {
        QF_LOSS_KEY: torch.mean(
            weights * huber(fwd_out[QF_PREDS], target, reduction="none", delta=1.0)
        )
    }
    if config.twin_q:
        losses[QF_TWIN_LOSS_KEY] = torch.mean(
            weights * huber(fwd_out[QF_TWIN_PREDS], target, reduction="none", delta=1.0)
        )
    logp = fwd_out["logp_resampled"]
    losses[POLICY_LOSS_KEY] = torch.mean(alpha.detach() * logp - fwd_out["q_curr"])
    target_entropy = learner.target_entropy[module_id]
    losses["alpha_loss"] = -torch.mean(log_alpha * (logp.detach() + target_entropy))
    with torch.no_grad():  # stats and priorities only: no graph
        td_error = torch.abs(fwd_out[QF_PREDS] - target)
        if config.twin_q:
            td_error += torch.abs(fwd_out[QF_TWIN_PREDS] - target)
            td_error *= 0.5
        q_curr = fwd_out["q_curr"]
        q_min, q_max = torch.aminmax(q_curr)
        stats = [
            losses[POLICY_LOSS_KEY],
            losses[QF_LOSS_KEY],
            losses["alpha_loss"],
            alpha[0],
            torch.log(alpha)[0],
            target_entropy.reshape(()),
            torch.mean(logp),
            torch.mean(q_curr),
            q_max,
            q_min,
            torch.mean(td_error),
        ]
        if config.twin_q:
            stats.append(losses[QF_TWIN_LOSS_KEY])
        stats = [stat.detach() for stat in stats]
    return losses, stats, td_error


class LeanSACLoss:
    """Mixin for SACTorchLearner: its update, loss and backward pass computed leanly
    where they cover the module (`lean_sac_module`), RLlib's own otherwise."""

    def tuner_lean_update(self, batch: dict[Any, Any]) -> Any:
        """The one-batch update with the lean forward pass, or None where it does not
        cover the batch (then RLlib's runs).

        Args:
            batch: The update's module batches, by module ID.

        Returns:
            What TorchLearner's `_update` returns, or None.
        """
        return lean_module_update(self, batch, lean_sac_module, sac_forward_train)

    def compute_loss_for_module(
        self, *, module_id: Any, config: Any, batch: dict[str, Any], fwd_out: dict[str, Any]
    ) -> Any:
        """RLlib's SAC loss and logged stats, the same values.

        Args:
            module_id: The module's ID.
            config: The module's SAC config.
            batch: The module's train batch.
            fwd_out: The module's forward_train output.

        Returns:
            The total loss.
        """
        kept = self.__dict__.setdefault(LOSSES, {})
        kept.pop(module_id, None)  # none of an update that did not reach its gradients
        if lean_sac_module(self, module_id) is None or Columns.LOSS_MASK in batch:
            return super().compute_loss_for_module(  # type: ignore[misc]
                module_id=module_id, config=config, batch=batch, fwd_out=fwd_out
            )
        losses, stats, td_error = sac_losses(self, module_id, config, batch, fwd_out)
        names = STAT_NAMES + ((QF_TWIN_LOSS_KEY,) if config.twin_q else ())
        log_loss_stats(self.metrics, module_id, names, stats, td_error)  # type: ignore[attr-defined]
        kept[module_id] = losses
        total = losses[POLICY_LOSS_KEY] + losses[QF_LOSS_KEY] + losses["alpha_loss"]
        return total + losses[QF_TWIN_LOSS_KEY] if config.twin_q else total

    def compute_gradients(self, loss_per_module: dict[Any, Any], **kwargs: Any) -> Any:
        """RLlib's SAC gradients from one backward pass of the lean losses' sum.

        Args:
            loss_per_module: The total loss by module.
            **kwargs: RLlib's keyword arguments.

        Returns:
            The gradients by parameter reference.
        """
        lean = self.__dict__.pop(LOSSES, None)
        if not lean or set(lean) != set(loss_per_module) - {ALL_MODULES}:
            return super().compute_gradients(loss_per_module, **kwargs)  # type: ignore[misc]
        optimizers = [
            optimizer
            for module_id in lean
            for _, optimizer in self.get_optimizers_for_module(module_id)  # type: ignore[attr-defined]
        ]
        for optimizer in optimizers:
            optimizer.zero_grad(set_to_none=True)
        torch.stack([loss for losses in lean.values() for loss in losses.values()]).sum().backward()
        return {
            self.get_param_ref(param): param.grad  # type: ignore[attr-defined]
            for optimizer in optimizers
            for group in optimizer.param_groups
            for param in group["params"]
        }
