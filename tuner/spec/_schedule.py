"""The scheduler settings a spec leaves out, set from its trials' budget and their
number (scheduler_defaults.yaml says why each rule is what it is)."""

from __future__ import annotations

import math
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from tuner.mlflow_names import ITERATION_KEY, STEP_KEY
from tuner.search_spaces import Domain
from tuner.spec._models import ExperimentSpec
from tuner.spec._sections import SchedulerSpec

_DEFAULTS = Path(__file__).with_name("scheduler_defaults.yaml")


@cache
def _rules() -> dict[str, Any]:
    return yaml.safe_load(_DEFAULTS.read_text())


def search_trials(spec: ExperimentSpec, space: dict[str, Domain]) -> int:
    """How many search trials the spec makes: the grid's size times num_samples."""
    size = 1
    for dom in space.values():
        if dom.kind == "grid":
            size *= len(dom.args)
    return size * spec.search.num_samples


def budget_in(spec: ExperimentSpec, time_attr: str) -> float | None:
    """A trial's budget in a scheduler's time_attr, where the stop criteria give it."""
    budget = {
        STEP_KEY: spec.stop.timesteps_total,
        ITERATION_KEY: spec.stop.training_iteration,
        "time_total_s": spec.stop.time_total_s,
    }
    return budget.get(time_attr)


def resolved_scheduler(spec: ExperimentSpec, space: dict[str, Domain]) -> SchedulerSpec:
    """The spec's scheduler with every setting it leaves out set: from the budget and the
    number of trials where the stop criteria give a budget, else the fixed fallbacks.
    What the spec sets is kept."""
    sched = spec.scheduler
    if sched.type not in ("asha", "median"):
        return sched
    rules = _rules()[sched.type]
    budget = budget_in(spec, sched.time_attr)
    trials = search_trials(spec, space)
    derived: dict[str, Any] = dict(rules["fallback"])
    if budget:
        derived = _asha(rules, budget, trials, sched) if sched.type == "asha" else {}
        if sched.type == "median":
            derived = {
                "grace_period": max(1, math.floor(rules["grace_fraction"] * budget)),
                "min_samples_required": max(2, min(rules["min_samples_required"], trials // 2)),
            }
    own = {k: v for k, v in sched.model_dump().items() if v is not None}
    return SchedulerSpec.model_validate({**derived, **own})


def _asha(rules: dict[str, Any], budget: float, trials: int, sched: SchedulerSpec) -> dict:
    factor = sched.reduction_factor or rules["reduction_factor"]
    max_t = sched.max_t or max(1, math.floor(budget), sched.grace_period or 1)
    rungs = 1
    while rungs < rules["max_rungs"] and trials >= factor**rungs * rules["trials_per_rung"]:
        rungs += 1
    grace = max(1, math.floor(max_t / factor ** (rungs - 1)))
    return {"max_t": max_t, "reduction_factor": factor, "grace_period": min(grace, max_t)}
