"""What makes a scheduler stop trials short of their budget: warnings, never errors.

A scheduler counts progress in its `time_attr`; the budget-aware defaults
(tuner/spec/scheduler_defaults.yaml) apply only where the stop criteria give a budget in
that unit. Each warning names the setting and what it does to the trials."""

from __future__ import annotations

import math

from tuner.mlflow_names import ITERATION_KEY, STEP_KEY
from tuner.rllib import default_config
from tuner.search_spaces import Domain
from tuner.spec import ExperimentSpec, budget_in, resolved_scheduler

# A budget's stop criterion and its unit as a person reads it, by the result key.
_BUDGETS = {
    STEP_KEY: ("stop.timesteps_total", "env steps"),
    ITERATION_KEY: ("stop.training_iteration", "iterations"),
    "time_total_s": ("stop.time_total_s", "s"),
}
# Algorithms whose iteration samples train_batch_size_per_learner env steps per learner.
_ON_POLICY = ("PPO", "APPO", "IMPALA")


def scheduler_warnings(spec: ExperimentSpec, space: dict[str, Domain]) -> list[str]:
    """Where the scheduler in force stops trials short of their budget: a time_attr with
    no budget in its unit (the fixed fallbacks apply), an own max_t below the budget, or
    a stop.training_iteration that ends on-policy trials before stop.timesteps_total."""
    sched = resolved_scheduler(spec, space)
    if sched.type not in ("asha", "median"):
        return []
    out = []
    unit = sched.time_attr or ITERATION_KEY
    given = [key for key in _BUDGETS if budget_in(spec, key)]
    if not budget_in(spec, unit) and given:
        field, words = _BUDGETS[given[0]]
        settings = (
            f"grace_period {sched.grace_period}, max_t {sched.max_t}"
            if sched.type == "asha"
            else f"grace_period {sched.grace_period}"
        )
        out.append(
            f"scheduler.time_attr {unit}: the budget is {field} ({budget_in(spec, given[0]):g} "
            f"{words}), not in {unit}, so {sched.type} falls back to {settings} {unit}: "
            "leave time_attr out to count progress in the budget's unit"
        )
    budget = budget_in(spec, unit)
    if sched.type == "asha" and budget and sched.max_t and sched.max_t < budget:
        field, words = _BUDGETS[unit]
        out.append(
            f"scheduler.max_t ({sched.max_t:g}) ends every trial short of its budget, "
            f"{field} ({budget:g} {words})"
        )
    short = _iterations_cut_steps(spec, space)
    if short:
        out.append(short)
    return out


def _iterations_cut_steps(spec: ExperimentSpec, space: dict[str, Domain]) -> str | None:
    """A warning where stop.training_iteration ends an on-policy trial (a fixed number of
    env steps per iteration) before stop.timesteps_total; None where it cannot or need
    not tell."""
    stop = spec.stop
    if not (stop.training_iteration and stop.timesteps_total):
        return None
    if spec.base_algorithm not in _ON_POLICY or spec.custom_algorithm:
        return None
    key = "train_batch_size_per_learner"
    dom = space.get(key)
    if dom is not None:
        numbers = [v for v in (dom.args if dom.kind in ("choice", "grid") else dom.args[:1])]
        if not all(isinstance(v, int | float) for v in numbers):
            return None
        batch = min(numbers)
    else:
        batch = spec.config.get(key) or default_config(spec.base_algorithm).total_train_batch_size
    learners = max(1, int(spec.resources.num_learners or 1))
    reach = stop.training_iteration * batch * learners
    if reach >= stop.timesteps_total:
        return None
    need = math.ceil(stop.timesteps_total / (batch * learners))
    some = "some trials (the smallest rollout)" if dom is not None else "every trial"
    return (
        f"stop.training_iteration ({stop.training_iteration}) ends {some} at "
        f"{reach:g} env steps, short of stop.timesteps_total ({stop.timesteps_total}): "
        f"{key} {batch:g} needs {need} iterations"
    )
