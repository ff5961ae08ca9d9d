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

import logging
import math
from typing import Any

import torch
from ray.rllib.algorithms.dqn.dqn import DQNConfig
from ray.rllib.algorithms.dqn.torch.dqn_torch_learner import DQNTorchLearner
from ray.rllib.algorithms.sac.torch.sac_torch_learner import SACTorchLearner
from ray.rllib.core.columns import Columns
from ray.rllib.policy.sample_batch import MultiAgentBatch

from tuner.ray_internals import single_batch_update, update_then_reduce
from tuner.rllib._lean_ppo import lean_loss_on

# True: an update of one tensor batch runs ray_internals.single_batch_update (RLlib's
# Learner.update without its iterator and Prometheus metrics); False: RLlib's update.
SINGLE_BATCH_UPDATE = True
ONE_BATCH_KWARGS = frozenset(
    {"batch", "training_data", "timesteps", "num_epochs", "minibatch_size", "_no_metrics_reduce"}
)

logger = logging.getLogger(__name__)


def _merged(reduce: str | None, window: Any, other: dict[str, Any]) -> str | None:
    """How a log call of a number merges with the key's previous ones until a reduce:
    "mean" for a plain window=1 mean (a value per update, of which RLlib reports the
    mean over the updates an iteration reduced: each reduce keeps the last, and the
    algorithm's metrics average what the reduces returned), "sum" for a sum (a counter),
    None where every call must be kept."""
    if window == 1 and reduce in (None, "mean") and not any(other.values()):
        return "mean"
    if reduce in ("sum", "lifetime_sum") and window is None and not other.get("percentiles"):
        return "sum"
    return None


# kinds of stat whose values, pushed one by one and reduced once, give what a reduce after
# each push and the algorithm's aggregation give (no window: nothing dropped or decayed)
_WHOLE = frozenset({"sum", "lifetime_sum", "item_series", "max", "min", "mean"})


def _kept(value: Any) -> Any:
    """A logged value as it is now (a parameter or view may change before the flush)."""
    return value.detach().clone() if isinstance(value, torch.Tensor) else value


class _Merged:
    """One stat's values merged, NaN skipped as RLlib's mean and sum stats skip it (a
    running sum and count, float64 for tensors), logged once: as the sum, or the mean."""

    def __init__(self, how: str, value: Any, kwargs: dict[str, Any]) -> None:
        self.how = how
        self.kwargs = kwargs
        self.total: Any = 0
        self.count: Any = 0
        self.add(value)

    def add(self, value: Any) -> None:
        if isinstance(value, torch.Tensor):
            number = value.detach().to(torch.float64)  # a copy: the value as it is now
            if number.numel() != 1:  # one update's value: RLlib's reduce of the tensor
                number = torch.nansum(number) if self.how == "sum" else torch.nanmean(number)
            number = number.reshape(())
            missing = torch.isnan(number)
            self.total = self.total + torch.where(missing, 0.0, number)
            self.count = self.count + (~missing).to(torch.float64)
        elif not (isinstance(value, float) and math.isnan(value)):
            self.total = self.total + value
            self.count = self.count + 1

    def value(self) -> Any:
        if self.how == "sum":
            value = self.total
        else:  # the NaN-skipping mean; NaN where every value was NaN, as RLlib's
            value = self.total / self.count if self.count else float("nan")
        if isinstance(value, torch.Tensor):
            return value.item()  # a number, as RLlib's reduce would report it
        return value


class MetricsRecorder:
    """Stands in for a Learner's MetricsLogger while it updates: keeps the log calls
    (each key's first-seen order) and passes every other use on to the real logger."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.drop: frozenset[str] = frozenset()  # stats nobody reads: not kept
        self.unlike: set[tuple[Any, ...]] = set()  # kept stats RLlib would report otherwise
        self._calls: dict[tuple[Any, ...], list[Any]] = {}

    def log_value(
        self,
        key: str | tuple[Any, ...],
        value: Any,
        *,
        reduce: str | None = None,
        window: Any = None,
        **other: Any,
    ) -> None:
        """Keeps one log call: a number logged as a window=1 mean or as a sum is added
        into the key's running mean or sum (logged once), any other call is kept as is.

        Args:
            key: The stat's key (a string or a tuple path).
            value: The logged value.
            reduce: RLlib's reduce method.
            window: RLlib's window.
            **other: RLlib's other log arguments, passed through unchanged.
        """
        path = tuple(key) if isinstance(key, tuple | list) else (key,)
        if path[-1] in self.drop:
            return
        kwargs = {"reduce": reduce, "window": window, **other}
        kept = self._calls.setdefault(path, [])
        numeric = isinstance(value, torch.Tensor | int | float) and not isinstance(value, bool)
        how = _merged(reduce, window, other) if numeric else None
        if how is None:
            if window is not None or reduce not in _WHOLE or other.get("ema_coeff"):
                # a windowed or EMA stat: reduced once after several updates it keeps or
                # weighs other values than a reduce after each (none on RLlib 2.60's DQN
                # or SAC update path: tests/integration/test_lean_metrics.py)
                if path not in self.unlike:
                    logger.warning(
                        "%s (%s, window %s) reduced once per iteration", path, reduce, window
                    )
                self.unlike.add(path)
            kept.append((_kept(value), kwargs))
            return
        last = kept[-1] if kept else None
        if isinstance(last, _Merged) and last.how == how and last.kwargs == kwargs:
            last.add(value)
        else:
            kept.append(_Merged(how, value, kwargs))

    def log_dict(
        self,
        value_dict: dict[str, Any],
        *,
        key: str | tuple[Any, ...] | None = None,
        reduce: str | None = "mean",
        window: Any = None,
        **other: Any,
    ) -> None:
        """Keeps a dict of stats as one log call per leaf, as MetricsLogger.log_dict
        logs them (the leaf's path under `key`).

        Args:
            value_dict: The (possibly nested) stats.
            key: Their common key prefix.
            reduce: RLlib's reduce method.
            window: RLlib's window.
            **other: RLlib's other log arguments, passed through unchanged.
        """
        prefix = () if key is None else (tuple(key) if isinstance(key, tuple | list) else (key,))
        for name, value in value_dict.items():
            if isinstance(value, dict):
                self.log_dict(value, key=(*prefix, name), reduce=reduce, window=window, **other)
            else:
                self.log_value((*prefix, name), value, reduce=reduce, window=window, **other)

    def flush(self) -> int:
        """Logs the kept calls into the real logger, each key in first-seen order.

        Returns:
            How many calls were logged.
        """
        calls, self._calls = self._calls, {}
        logged = 0
        for path, kept in calls.items():
            for call in kept:
                value, kwargs = (call.value(), call.kwargs) if isinstance(call, _Merged) else call
                self.real.log_value(path, value, **kwargs)
                logged += 1
        return logged

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("real", "drop", "unlike", "_calls"):
            raise AttributeError(name)
        return getattr(self.real, name)


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


class LeanDQNTorchLearner(DeferredUpdateMetrics, DQNTorchLearner):
    """DQNTorchLearner whose update metrics are logged once per reduce (the same values)."""


class LeanSACTorchLearner(DeferredUpdateMetrics, SACTorchLearner):
    """SACTorchLearner whose update metrics are logged once per reduce (the same values)."""


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
