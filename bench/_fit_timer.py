"""A Tune callback that times the fit loop of a sweep (kept apart: it imports ray)."""

from __future__ import annotations

import time
from typing import Any

from ray import tune

# Written by the callback, read by the benchmark: a module-level dict of an importable
# module, so a copy of the callback that Tune may hold still writes where we read.
_TIMES: dict[str, list[float]] = {}


class FitTimer(tune.Callback):
    """Records when Tune's loop starts (setup) and ends (on_experiment_end)."""

    def __init__(self, key: str) -> None:
        self.key = key

    def setup(self, **info: Any) -> None:
        _TIMES[self.key] = [time.perf_counter()]

    def on_experiment_end(self, trials: list, **info: Any) -> None:
        _TIMES.setdefault(self.key, [float("nan")]).append(time.perf_counter())


def fit_seconds(key: str) -> float:
    """Seconds between a FitTimer's setup and on_experiment_end (nan if unknown)."""
    times = _TIMES.get(key) or []
    return times[1] - times[0] if len(times) == 2 else float("nan")
