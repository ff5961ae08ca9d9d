"""PPO's loss without its per-minibatch bookkeeping: the same loss and gradients as
RLlib's PPOTorchLearner, through RLlib's public extension point (`learner_class`).

RLlib's loss takes every masked mean by boolean indexing (a copy of each tensor per
mean), and computes and logs six metrics per minibatch, the explained variance among
them, though it keeps only the last minibatch's (window=1). Here the masked means are
weighted sums, and the last minibatch's metrics are logged once, after the update, before
PPO's KL-coefficient step reads them: the same reported values.

The update's other per-minibatch log calls (eight step counters, the gradient norm, the
batch's off-policyness: a tenth of a small update) go into a MetricsRecorder that keeps a
window=1 stat's last value and a counter's sum, and logs them before the update's one
reduce; the off-policyness, the same for every minibatch of an update, is computed once,
for the last one. The same reported values (tests/unit/test_lean_ppo.py).

TunerPPOConfig makes it the default Learner of a torch PPO trial. A spec that names its
own `learner_class` keeps its own; `TUNER_LEAN_LOSS=0` keeps RLlib's (for comparisons).
"""

from __future__ import annotations

import os
from typing import Any

import torch
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.algorithms.ppo.ppo import (
    LEARNER_RESULTS_KL_KEY,
    LEARNER_RESULTS_VF_EXPLAINED_VAR_KEY,
    LEARNER_RESULTS_VF_LOSS_UNCLIPPED_KEY,
)
from ray.rllib.algorithms.ppo.torch.ppo_torch_learner import PPOTorchLearner
from ray.rllib.core.columns import Columns
from ray.rllib.core.learner.learner import ENTROPY_KEY, POLICY_LOSS_KEY, VF_LOSS_KEY
from ray.rllib.evaluation.postprocessing import Postprocessing
from ray.rllib.utils.torch_utils import explained_variance

from tuner.ray_internals import DeferredOffPolicyness, LeanMinibatchHook
from tuner.rllib import _lean_categorical as categorical
from tuner.rllib._lean_minibatches import lean_minibatches
from tuner.rllib._metrics_recorder import MetricsRecorder

LEAN_LOSS_SWITCH = "TUNER_LEAN_LOSS"


def lean_loss_on() -> bool:
    """Whether a torch PPO trial takes the lean loss (TUNER_LEAN_LOSS is not "0").

    Returns:
        True unless the switch is off.
    """
    return os.environ.get(LEAN_LOSS_SWITCH, "1") != "0"


class LeanPPOTorchLearner(DeferredOffPolicyness, LeanMinibatchHook, PPOTorchLearner):
    """PPOTorchLearner with the same loss and gradients, its metrics logged once per
    update, its minibatches cut as RLlib cuts them without SampleBatch slicing."""

    def update(self, *args: Any, **kwargs: Any) -> Any:
        """RLlib's update, its minibatches' log calls kept and logged before its reduce.

        Args:
            *args: RLlib's update arguments.
            **kwargs: RLlib's update keyword arguments.

        Returns:
            RLlib's reduced results (None where the caller asked for no reduce).
        """
        real = self.metrics
        self._tuner_recorder = MetricsRecorder(real, window_one="last")
        self.metrics = self._tuner_recorder
        self.tuner_defer_off_policyness(True)
        try:
            return super().update(*args, **kwargs)
        finally:  # where the update failed before its end logged what it kept
            self.tuner_defer_off_policyness(False)
            self.metrics = real
            self._tuner_recorder = None

    def tuner_minibatches(self, batch: Any, **settings: Any) -> Any:
        """The lean minibatch iterator over a train batch, or None for RLlib's.

        Args:
            batch: The train batch.
            **settings: The iterator's settings (num_epochs, minibatch_size, ...).

        Returns:
            The iterator, or None.
        """
        return lean_minibatches(batch, **settings)

    def build(self) -> None:
        """RLlib's build, then no metrics held for any module yet."""
        super().build()
        self._tuner_last_metrics: dict[Any, dict[str, Any]] = {}

    def compute_loss_for_module(
        self, *, module_id: Any, config: Any, batch: dict[str, Any], fwd_out: dict[str, Any]
    ) -> torch.Tensor:
        """PPO's clipped surrogate, value and entropy terms (and KL where the config uses
        it), as RLlib's PPOTorchLearner computes them.

        Args:
            module_id: The module's id.
            config: The module's PPOConfig.
            batch: The minibatch.
            fwd_out: The module's forward_train output on it.

        Returns:
            The total loss.
        """
        module = self.module[module_id].unwrapped()
        mask = batch.get(Columns.LOSS_MASK)
        if mask is not None:
            num_valid = torch.sum(mask)

            def masked_mean(data: torch.Tensor) -> torch.Tensor:
                return torch.sum(torch.where(mask, data, torch.zeros_like(data))) / num_valid

        else:
            masked_mean = torch.mean

        logp, kl, entropy = _policy_terms(module, fwd_out, batch, use_kl=config.use_kl_loss)
        logp_ratio = torch.exp(logp - batch[Columns.ACTION_LOGP])
        if config.use_kl_loss:
            mean_kl = masked_mean(kl)
        else:
            mean_kl = torch.zeros((), device=logp_ratio.device)
        advantages = batch[Postprocessing.ADVANTAGES]
        surrogate = torch.min(
            advantages * logp_ratio,
            advantages * torch.clamp(logp_ratio, 1 - config.clip_param, 1 + config.clip_param),
        )
        zero = torch.zeros((), device=surrogate.device)
        if config.use_critic:
            values = module.compute_values(batch, embeddings=fwd_out.get(Columns.EMBEDDINGS))
            vf_loss = torch.pow(values - batch[Postprocessing.VALUE_TARGETS], 2.0)
            vf_loss_clipped = torch.clamp(vf_loss, 0, config.vf_clip_param)
        else:
            values = vf_loss = vf_loss_clipped = zero
        entropy_coeff = self.entropy_coeff_schedulers_per_module[module_id].get_current_value()
        total = masked_mean(
            -surrogate + config.vf_loss_coeff * vf_loss_clipped - entropy_coeff * entropy
        )
        if config.use_kl_loss:
            total = total + self.curr_kl_coeffs_per_module[module_id] * mean_kl
        # what RLlib logs per minibatch (keeping the last, window=1): kept, detached, and
        # reduced once the update ends
        self._tuner_last_metrics[module_id] = {
            "surrogate": surrogate.detach(),
            "vf_loss": vf_loss.detach(),
            "vf_loss_clipped": vf_loss_clipped.detach(),
            "values": values.detach(),
            "entropy": entropy.detach(),
            "kl": mean_kl.detach(),
            "mask": mask,
            "use_critic": bool(config.use_critic),
            "value_targets": batch[Postprocessing.VALUE_TARGETS],
        }
        return total

    def after_gradient_based_update(self, *, timesteps: dict[str, Any]) -> None:
        """Logs each module's last-minibatch metrics (RLlib's names and values), then
        RLlib's step (the KL coefficient reads the KL logged here).

        Args:
            timesteps: The update's timesteps, as RLlib passes them.
        """
        recorder = self.__dict__.get("_tuner_recorder")
        if recorder is not None:  # the minibatches' calls, then the real logger again
            self.tuner_log_off_policyness()
            self.metrics = recorder.real
            recorder.flush()
        for module_id, kept in self._tuner_last_metrics.items():
            self.metrics.log_dict(_reported(kept), key=module_id, window=1)
        self._tuner_last_metrics = {}
        super().after_gradient_based_update(timesteps=timesteps)


def _policy_terms(
    module: Any, fwd_out: dict[str, Any], batch: dict[str, Any], *, use_kl: bool
) -> tuple[torch.Tensor, Any, torch.Tensor]:
    """The actions' log-probabilities, the KL from the sampling policy (None without the
    KL term) and the entropy: from RLlib's distribution objects, or, for RLlib's own
    Categorical, from the same torch operations without them (_lean_categorical)."""
    inputs = fwd_out[Columns.ACTION_DIST_INPUTS]
    train_cls = module.get_train_action_dist_cls()
    lean = categorical.is_categorical(train_cls) and (
        not use_kl or categorical.is_categorical(module.get_exploration_action_dist_cls())
    )
    if not lean:
        curr_dist = train_cls.from_logits(inputs)
        logp = curr_dist.logp(batch[Columns.ACTIONS])
        kl = None
        if use_kl:
            prev_dist = module.get_exploration_action_dist_cls().from_logits(
                batch[Columns.ACTION_DIST_INPUTS]
            )
            kl = prev_dist.kl(curr_dist)
        return logp, kl, curr_dist.entropy()
    # in the order torch's objects compute them, the probabilities shared as they cache
    curr = categorical.normalized(inputs)
    logp = categorical.logp(curr, batch[Columns.ACTIONS])
    kl = curr_probs = None
    if use_kl:
        prev = categorical.normalized(batch[Columns.ACTION_DIST_INPUTS])
        kl, curr_probs = categorical.kl(prev, curr)
    return logp, kl, categorical.entropy(curr, curr_probs)


def _reported(kept: dict[str, Any]) -> dict[str, torch.Tensor]:
    """RLlib's per-minibatch PPO metrics, from one minibatch's kept tensors."""
    mask = kept["mask"]

    def masked_mean(data: torch.Tensor) -> torch.Tensor:
        if mask is None or data.dim() == 0:
            return torch.mean(data)
        return torch.sum(data[mask]) / torch.sum(mask)

    use_critic = kept["use_critic"]
    zero = torch.zeros((), device=kept["entropy"].device)
    return {
        POLICY_LOSS_KEY: -masked_mean(kept["surrogate"]),
        VF_LOSS_KEY: masked_mean(kept["vf_loss_clipped"]) if use_critic else zero,
        LEARNER_RESULTS_VF_LOSS_UNCLIPPED_KEY: masked_mean(kept["vf_loss"]) if use_critic else zero,
        LEARNER_RESULTS_VF_EXPLAINED_VAR_KEY: explained_variance(
            kept["value_targets"], kept["values"]
        ),
        ENTROPY_KEY: masked_mean(kept["entropy"]),
        LEARNER_RESULTS_KL_KEY: kept["kl"],
    }


class TunerPPOConfig(PPOConfig):
    """PPOConfig whose default torch Learner is LeanPPOTorchLearner (unless switched off)."""

    def get_default_learner_class(self) -> Any:
        """The lean Learner for torch, RLlib's otherwise or with TUNER_LEAN_LOSS=0.

        Returns:
            The Learner class.
        """
        if self.framework_str == "torch" and lean_loss_on():
            return LeanPPOTorchLearner
        return super().get_default_learner_class()
