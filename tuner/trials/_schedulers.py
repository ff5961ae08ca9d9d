"""Trial schedulers from the spec (metric and mode are set in TuneConfig only)."""

from __future__ import annotations

from typing import Any

from ray.tune.schedulers import (
    ASHAScheduler,
    FIFOScheduler,
    MedianStoppingRule,
    PopulationBasedTraining,
    TrialScheduler,
)

from tuner.search_spaces import Domain
from tuner.spec import SchedulerSpec


def build_scheduler(spec: SchedulerSpec, space: dict[str, Domain]) -> TrialScheduler:
    """The Tune scheduler a spec asks for."""
    if spec.type == "asha":
        return ASHAScheduler(
            time_attr=spec.time_attr,
            grace_period=spec.grace_period,
            max_t=spec.max_t,
            reduction_factor=spec.reduction_factor,
        )
    if spec.type == "median":
        return MedianStoppingRule(
            time_attr=spec.time_attr, grace_period=spec.grace_period, min_samples_required=2
        )
    if spec.type == "pbt":
        mutations: dict[str, Any] = {
            key: dom.to_tune() for key, dom in space.items() if "." not in key
        }
        return PopulationBasedTraining(
            time_attr=spec.time_attr,
            perturbation_interval=spec.perturbation_interval,
            hyperparam_mutations=mutations,
        )
    return FIFOScheduler()
