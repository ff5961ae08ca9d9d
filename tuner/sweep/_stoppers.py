"""Stop criteria: per-trial thresholds and ending the whole sweep on target."""

from __future__ import annotations

import math
from typing import Any

from ray.tune.stopper import Stopper

from tuner.results import lookup


class SweepStopper(Stopper):
    """Stops a trial when any criterion is reached (value >= threshold).

    Tune hands a Stopper the nested result, so keys are looked up path by path.
    With `target_key`, the whole sweep ends once any trial reaches its threshold.
    Only plain values as attributes: the stopper is pickled into Tune's state.
    """

    def __init__(self, criteria: dict[str, float], target_key: str | None = None) -> None:
        self.criteria = dict(criteria)
        self.target_key = target_key
        self.target_reached_by: str | None = None

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        hit = False
        for key, threshold in self.criteria.items():
            value = lookup(result, key)
            if isinstance(value, int | float) and math.isfinite(value) and value >= threshold:
                hit = True
                if key == self.target_key and self.target_reached_by is None:
                    self.target_reached_by = trial_id
        return hit

    def stop_all(self) -> bool:
        return self.target_reached_by is not None
