"""A Learner's log calls kept during an update and logged into its MetricsLogger later,
merged where the reduce that follows reports the same: a window=1 number as its running
mean (DQN and SAC, flushed once for several reduces) or its last value (PPO's minibatches,
flushed before their update's reduce), a counter as its sum, NaN skipped as RLlib's mean
and sum stats skip it; every other call kept in full and in order.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import torch

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
    running sum and count, float64 for tensors), logged once: as the sum, or the mean.

    A tensor value is kept as a float64 copy and all are summed at the flush: one small
    op per update instead of the running sum's nine (a tenth of a small DQN update)."""

    def __init__(self, how: str, value: Any, kwargs: dict[str, Any]) -> None:
        self.how = how
        self.kwargs = kwargs
        self.total: Any = 0
        self.count: Any = 0
        self.tensors: list[torch.Tensor] = []
        self.add(value)

    def add(self, value: Any) -> None:
        if isinstance(value, torch.Tensor):
            number = value.detach()
            if number.numel() != 1:  # one update's value: RLlib's reduce of the tensor
                number = number.to(torch.float64)
                number = torch.nansum(number) if self.how == "sum" else torch.nanmean(number)
            # a copy: the value as it is now
            self.tensors.append(number.to(torch.float64, copy=True).reshape(()))
        elif not (isinstance(value, float) and math.isnan(value)):
            self.total = self.total + value
            self.count = self.count + 1

    def value(self) -> Any:
        total, count = self.total, self.count
        if self.tensors:
            numbers = torch.stack(self.tensors)
            missing = torch.isnan(numbers)
            total = total + torch.where(missing, 0.0, numbers).sum()
            count = count + (~missing).sum().to(torch.float64)
        if self.how == "sum":
            value = total
        else:  # the NaN-skipping mean; NaN where every value was NaN, as RLlib's
            value = total / count if count else float("nan")
        if isinstance(value, torch.Tensor):
            return value.item()  # a number, as RLlib's reduce would report it
        return value


class _Rows:
    """Several window=1 stats of each update kept as one float64 row (one copy an
    update, not one per stat); each column reported as its `_Merged` mean would be."""

    def __init__(self) -> None:
        self.rows: list[torch.Tensor] = []
        self._means: list[Any] | None = None

    def add(self, row: torch.Tensor) -> None:
        self.rows.append(row.detach().to(torch.float64, copy=True).reshape(-1))
        self._means = None

    def mean(self, column: int) -> Any:
        if self._means is None:
            numbers = torch.stack(self.rows)
            missing = torch.isnan(numbers)
            totals = torch.where(missing, 0.0, numbers).sum(dim=0)
            counts = (~missing).sum(dim=0)
            # the NaN-skipping mean; NaN where every value was NaN, as RLlib's
            self._means = [
                (total / count).item() if count else float("nan")
                for total, count in zip(totals, counts, strict=True)
            ]
        return self._means[column]


class _Column:
    """One stat of a `_Rows` group, logged at the flush as a window=1 mean."""

    def __init__(self, rows: _Rows, column: int) -> None:
        self.kwargs: dict[str, Any] = {"reduce": "mean", "window": 1}
        self.rows = rows
        self.column = column

    def value(self) -> Any:
        return self.rows.mean(self.column)


class MetricsRecorder:
    """Stands in for a Learner's MetricsLogger while it updates: keeps the log calls
    (each key's first-seen order) and passes every other use on to the real logger.

    `window_one`: how a window=1 number's calls merge. "mean" (DQN, SAC: flushed once for
    several reduces, each of which would have kept one update's value); "last" (PPO's
    minibatches: flushed before their update's one reduce, which keeps the last value, as
    it keeps every other call's effect: nothing is reported otherwise)."""

    def __init__(self, real: Any, window_one: str = "mean") -> None:
        self.real = real
        self.window_one = window_one
        self.drop: frozenset[str] = frozenset()  # stats nobody reads: not kept
        self.unlike: set[tuple[Any, ...]] = set()  # kept stats RLlib would report otherwise
        self._calls: dict[tuple[Any, ...], list[Any]] = {}
        self._rows: dict[tuple[Any, ...], _Rows] = {}

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
        if how == "mean" and self.window_one == "last":
            kept[:] = [(_kept(value), kwargs)]  # the one value a window of 1 reports
            return
        if how is None:
            unlike = window is not None or reduce not in _WHOLE or other.get("ema_coeff")
            if unlike and self.window_one == "mean":
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

    def log_row(
        self, key: str | tuple[Any, ...], names: tuple[str, ...], row: torch.Tensor
    ) -> None:
        """Keeps one update's window=1 stats given as one tensor (`row[i]` is stat
        `names[i]` under `key`): what `log_dict(dict(zip(names, row)), key=key,
        window=1)` keeps, in one copy. The stats must be logged through this call only.

        Args:
            key: The stats' common key prefix.
            names: The stats' names, in the row's order.
            row: Their values, a 1-d tensor.
        """
        prefix = tuple(key) if isinstance(key, tuple | list) else (key,)
        if self.window_one != "mean":  # "last": the one value a window of 1 reports
            self.log_dict(dict(zip(names, row, strict=True)), key=prefix, window=1)
            return
        group = (prefix, names)
        rows = self._rows.get(group)
        if rows is None:
            rows = self._rows[group] = _Rows()
            for column, name in enumerate(names):
                if name not in self.drop:
                    self._calls.setdefault((*prefix, name), []).append(_Column(rows, column))
        rows.add(row)

    def flush(self) -> int:
        """Logs the kept calls into the real logger, each key in first-seen order.

        Returns:
            How many calls were logged.
        """
        calls, self._calls, self._rows = self._calls, {}, {}
        logged = 0
        for path, kept in calls.items():
            for call in kept:
                merged = isinstance(call, _Merged | _Column)
                value, kwargs = (call.value(), call.kwargs) if merged else call
                self.real.log_value(path, value, **kwargs)
                logged += 1
        return logged

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("real", "drop", "unlike", "_calls", "_rows"):
            raise AttributeError(name)
        return getattr(self.real, name)
