"""Timers inside a sweep's driver: Tune's fit loop, and our MLflow callback's hooks.

Kept apart from _common.py because it imports ray and tuner.sweep."""

from __future__ import annotations

import time
from typing import Any

from ray import tune

from tuner.tracking._mlflow_tracker import MLflowTracker

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


# -- time spent inside our MLflow callback --------------------------------------------

_TRACKER_S: dict[str, dict[str, float]] = {}
_DEPTH = [0]  # nested calls (on_trial_start -> start) count once, at the outermost


def _timed(name: str) -> Any:
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        _DEPTH[0] += 1
        t0 = time.perf_counter()
        try:
            return getattr(MLflowTracker, name)(self, *args, **kwargs)
        finally:
            _DEPTH[0] -= 1
            if _DEPTH[0] == 0:
                phase = {"start": "before fit", "finish": "after fit"}.get(name, "during fit")
                times = _TRACKER_S.setdefault(self.run_name, {})
                times[phase] = times.get(phase, 0.0) + time.perf_counter() - t0

    method.__name__ = name
    return method


class TimedTracker(MLflowTracker):
    """MLflowTracker that adds up the seconds spent in it, per sweep (run name).

    Tune calls callbacks in the driver's loop, between a trial's result and its next
    training step, so the time "during fit" is what tracking adds to that loop;
    run_sweep calls start() before and finish() after the fit."""

    start = _timed("start")
    setup = _timed("setup")
    on_trial_start = _timed("on_trial_start")
    on_trial_result = _timed("on_trial_result")
    on_trial_complete = _timed("on_trial_complete")
    on_trial_error = _timed("on_trial_error")
    finish = _timed("finish")


def use_timed_tracker() -> None:
    """Makes run_sweep (in this process only) track with TimedTracker."""
    import tuner.sweep._run as run_module

    run_module.MLflowTracker = TimedTracker


def tracker_seconds(run_name: str) -> dict[str, float]:
    """{"before fit", "during fit", "after fit"}: seconds spent in the tracker."""
    times = _TRACKER_S.get(run_name, {})
    return {k: times.get(k, 0.0) for k in ("before fit", "during fit", "after fit")}
