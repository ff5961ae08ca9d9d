"""A Learner's update metrics logged once per reduce, not once per update: the same
reported values, for DQN and SAC.

Every update of RLlib's DQN and SAC Learners logs five to twelve single-value loss stats
(window=1), the per-sample TD errors, the total loss and eight step counters. Each log
call walks MetricsLogger's key tree: on a small network a tenth of an update. RLlib's own
training step reduces after every update, and the algorithm's metrics then average the
iteration's reduced values with equal weight; so a window=1 stat is reported as its mean
over the iteration's updates, and a counter as its sum.

`DeferredUpdateMetrics` keeps an update's log calls in a `MetricsRecorder` and hands them
to the real logger just before a reduce: a window=1 number as one running mean, a sum
as one running sum, NaN skipped (what the reduces would report: RLlib's mean and sum
stats skip NaN), every other call in full and in order (the TD errors' "item_series"
among them; a windowed or EMA stat, which one reduce reports otherwise, is named in a
warning). Nothing else in the update changes. The flat replay path then reduces a
uniform buffer's learner metrics once per iteration (`_fast_replay.end_iteration`), not
after every update, and has the Learner drop the TD errors it never reads.

The lean Learners are the defaults of torch DQN and SAC trials; a spec that names its own
`learner_class` keeps it, and `TUNER_LEAN_LOSS=0` keeps RLlib's (for comparisons).
"""

from __future__ import annotations

from typing import Any

import torch
from ray.rllib.algorithms.dqn.dqn import DQNConfig
from ray.rllib.algorithms.dqn.torch.dqn_torch_learner import DQNTorchLearner
from ray.rllib.algorithms.sac.torch.sac_torch_learner import SACTorchLearner
from ray.rllib.core.columns import Columns
from ray.rllib.policy.sample_batch import MultiAgentBatch

from tuner.ray_internals import single_batch_update, update_then_reduce
from tuner.rllib._lean_dqn import LeanDQNLoss
from tuner.rllib._lean_ppo import lean_loss_on
from tuner.rllib._lean_sac import LeanSACLoss
from tuner.rllib._metrics_recorder import MetricsRecorder

# True: an update of one tensor batch runs ray_internals.single_batch_update (RLlib's
# Learner.update without its iterator and Prometheus metrics); False: RLlib's update.
SINGLE_BATCH_UPDATE = True
ONE_BATCH_KWARGS = frozenset(
    {"batch", "training_data", "timesteps", "num_epochs", "minibatch_size", "_no_metrics_reduce"}
)


class DeferredUpdateMetrics:
    """Mixin for a torch Learner: its updates log into a MetricsRecorder, flushed right
    before a reduce (its update's, or `tuner_flush_update_metrics` before another)."""

    def _tuner_recorder(self) -> MetricsRecorder:
        real = self.metrics  # type: ignore[has-type]
        recorder = self.__dict__.get("_tuner_metrics_recorder")
        if recorder is None or recorder.real is not real:  # a new logger (set_state)
            if recorder is not None:
                recorder.flush()
            recorder = self.__dict__["_tuner_metrics_recorder"] = MetricsRecorder(real)
        return recorder

    def update(self, *args: Any, **kwargs: Any) -> Any:
        """RLlib's update, its log calls kept; logged just before it reduces.

        Args:
            *args: RLlib's update arguments.
            **kwargs: RLlib's update keyword arguments.

        Returns:
            RLlib's reduced results, or None where the caller asked for no reduce.
        """
        real = self.metrics  # type: ignore[has-type]
        recorder = self._tuner_recorder()
        recorder.drop = self.__dict__.get("_tuner_dropped_stats", frozenset())

        def recorded_update(*update_args: Any, **update_kwargs: Any) -> Any:
            self.metrics = recorder
            try:
                batch = self._tuner_one_tensor_batch(update_args, update_kwargs)
                if batch is not None:
                    single_batch_update(self, batch, update_kwargs.get("timesteps") or {})
                    return None
                return super(DeferredUpdateMetrics, self).update(  # type: ignore[misc]
                    *update_args, **update_kwargs
                )
            finally:
                self.metrics = real

        return update_then_reduce(recorded_update, recorder.flush, real, args, kwargs)

    def _tuner_one_tensor_batch(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """The update's one MultiAgentBatch where `single_batch_update` does what RLlib's
        update would (its columns torch tensors on this Learner's device, no sequences,
        one epoch, no minibatches, nothing else to update from), else None."""
        if not SINGLE_BATCH_UPDATE or args or set(kwargs) - ONE_BATCH_KWARGS:
            return None
        if kwargs.get("num_epochs", 1) != 1 or kwargs.get("minibatch_size") is not None:
            return None
        data, batch = kwargs.get("training_data"), kwargs.get("batch")
        if data is not None:
            others = ("batches", "batch_refs", "episodes", "episodes_refs", "data_iterators")
            if batch is not None or any(getattr(data, name) is not None for name in others):
                return None
            batch = data.batch
        if not isinstance(batch, MultiAgentBatch):
            return None
        device = self.device  # type: ignore[attr-defined]
        for module_batch in batch.policy_batches.values():
            if Columns.SEQ_LENS in module_batch:
                return None
            for value in module_batch.values():
                if not isinstance(value, torch.Tensor) or value.device != device:
                    return None
        return batch

    def tuner_drop_stats(self, names: set[str] | frozenset[str]) -> None:
        """Stats (by their last key) this Learner's updates no longer keep or log: the
        flat path's uniform buffer never reads the TD errors.

        Args:
            names: The stats' names.
        """
        self.__dict__["_tuner_dropped_stats"] = frozenset(names)

    def tuner_unlike_stats(self) -> set[tuple[Any, ...]]:
        """Stats this Learner's updates logged whose once-a-reduce report is not RLlib's
        (a windowed or EMA stat), by key.

        Returns:
            Their keys.
        """
        recorder = self.__dict__.get("_tuner_metrics_recorder")
        return set(recorder.unlike) if recorder is not None else set()

    def tuner_flush_update_metrics(self) -> None:
        """Logs the kept update metrics into the Learner's MetricsLogger (before a reduce)."""
        recorder = self.__dict__.get("_tuner_metrics_recorder")
        if recorder is not None:
            recorder.flush()


class LeanDQNTorchLearner(DeferredUpdateMetrics, LeanDQNLoss, DQNTorchLearner):
    """DQNTorchLearner whose update metrics are logged once per reduce and whose loss
    is computed without RLlib's per-update overhead (the same values)."""


class LeanSACTorchLearner(DeferredUpdateMetrics, LeanSACLoss, SACTorchLearner):
    """SACTorchLearner whose update metrics are logged once per reduce and whose update
    is computed without RLlib's per-update overhead (the same values, _lean_sac.py)."""


def lean_learner_class(config: Any, rllib_default: type) -> type:
    """The lean Learner of a torch DQN or SAC config, else RLlib's default.

    Args:
        config: The algorithm config.
        rllib_default: RLlib's default Learner class for it.

    Returns:
        The Learner class to use.
    """
    if config.framework_str != "torch" or not lean_loss_on():
        return rllib_default
    lean = {DQNTorchLearner: LeanDQNTorchLearner, SACTorchLearner: LeanSACTorchLearner}
    return lean.get(rllib_default, rllib_default)


class TunerDQNConfig(DQNConfig):
    """DQNConfig whose default torch Learner is LeanDQNTorchLearner (unless switched off)."""

    def get_default_learner_class(self) -> Any:
        """The lean Learner for torch, RLlib's otherwise or with TUNER_LEAN_LOSS=0.

        Returns:
            The Learner class.
        """
        return lean_learner_class(self, super().get_default_learner_class())
