"""The scheduler settings a spec leaves out, set from its trials' budget and their
number (scheduler_defaults.yaml says why each rule is what it is; SchedulerDefaults is
its schema)."""

from __future__ import annotations

import math
from functools import cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from tuner.data_files import load_data_file
from tuner.mlflow_names import ITERATION_KEY, STEP_KEY
from tuner.results import EVALUATION_PREFIX, training_metric
from tuner.search_spaces import Domain
from tuner.spec._models import ExperimentSpec
from tuner.spec._scheduler_section import SchedulerSpec
from tuner.spec._sections import SamplerSpec

_DEFAULTS = Path(__file__).with_name("scheduler_defaults.yaml")


_STRICT = ConfigDict(extra="forbid", frozen=True, strict=True)


class AshaFallback(BaseModel):
    """ASHA's settings without a budget in its time_attr."""

    model_config = _STRICT

    grace_period: int = Field(ge=1)
    max_t: int = Field(ge=1)
    reduction_factor: int = Field(ge=2)


class AshaRules(BaseModel):
    """How ASHA's settings follow the budget B and the number of trials N."""

    model_config = _STRICT

    max_t: Literal["budget"] = Field(description="Every trial may run its whole budget.")
    reduction_factor: int = Field(ge=2)
    max_rungs: int = Field(ge=1)
    trials_per_rung: int = Field(ge=1)
    fallback: AshaFallback


class HyperbandRules(BaseModel):
    """hyperband: asha's rules, over as many brackets as halving levels (at most max_brackets)."""

    model_config = _STRICT

    max_brackets: int = Field(ge=1)


class MedianFallback(BaseModel):
    """The median stopping rule's settings without a budget in its time_attr."""

    model_config = _STRICT

    grace_period: int = Field(ge=1)
    min_samples_required: int = Field(ge=1)


class MedianRules(BaseModel):
    """How the median stopping rule's settings follow the budget and the trials."""

    model_config = _STRICT

    grace_fraction: float = Field(gt=0, lt=1)
    min_samples_required: int = Field(ge=1)
    fallback: MedianFallback


class OptunaRules(BaseModel):
    """Optuna's sampler where the spec names none, and its random start from N."""

    model_config = _STRICT

    sampler: Literal["tpe", "gp"]
    startup_fraction: float = Field(gt=0, le=1)
    min_startup_trials: int = Field(ge=1)
    max_startup_trials: int = Field(ge=1)


class SchedulerDefaults(BaseModel):
    """scheduler_defaults.yaml: the rules per scheduler type, and Optuna's sampler."""

    model_config = _STRICT

    asha: AshaRules
    hyperband: HyperbandRules
    median: MedianRules
    optuna: OptunaRules


@cache
def _rules(path: Path = _DEFAULTS) -> SchedulerDefaults:
    return load_data_file(path, SchedulerDefaults)


def search_trials(spec: ExperimentSpec, space: dict[str, Domain]) -> int:
    """How many search trials the spec makes: the grid's size times num_samples.

    Args:
        spec: The sweep's spec.
        space: The resolved search space.

    Returns:
        The number of trials.
    """
    size = 1
    for dom in space.values():
        if dom.kind == "grid":
            size *= len(dom.args)
    return size * spec.search.num_samples


def budget_in(spec: ExperimentSpec, time_attr: str) -> float | None:
    """A trial's budget in a scheduler's time_attr, where the stop criteria give it.

    Args:
        spec: The sweep's spec.
        time_attr: The result key the scheduler counts progress in.

    Returns:
        The budget, or None.
    """
    budget = {
        STEP_KEY: spec.stop.timesteps_total,
        ITERATION_KEY: spec.stop.training_iteration,
        _TIME_KEY: spec.stop.time_total_s,
    }
    return budget.get(time_attr)


# The result keys a budget can be counted in, in the order a scheduler takes its unit
# from the stop criteria: env steps first (the unit budgets are published in).
_TIME_KEY = "time_total_s"
_BUDGET_UNITS = (STEP_KEY, ITERATION_KEY, _TIME_KEY)


def budget_unit(spec: ExperimentSpec) -> str:
    """The result key a scheduler counts progress in.

    The spec's own `time_attr`, else the unit of its budget (env steps, iterations, then
    seconds), else iterations. pbt and pb2 count iterations unless told (their
    perturbation_interval is in it).

    Args:
        spec: The sweep's spec.

    Returns:
        The result key.
    """
    sched = spec.scheduler
    if sched.time_attr is not None:
        return sched.time_attr
    if sched.halving or sched.type == "median":
        for key in _BUDGET_UNITS:
            if budget_in(spec, key):
                return key
    return ITERATION_KEY


def scheduler_metric(spec: ExperimentSpec) -> str:
    """The metric a scheduler judges trials on.

    The spec's metric, but for an evaluation metric that only the final evaluation
    reports (evaluation.at_end without an interval): a scheduler needs a value at its
    rungs, so it judges that metric of the training episodes (`evaluation/` dropped:
    `env_runners/episode_return_mean`); the final ranking still uses the evaluation.

    Args:
        spec: The sweep's spec.

    Returns:
        The result key.
    """
    if spec.metric.startswith(EVALUATION_PREFIX) and not spec.evaluation.interval:
        return training_metric(spec.metric)
    return spec.metric


def resolved_scheduler(spec: ExperimentSpec, space: dict[str, Domain]) -> SchedulerSpec:
    """The spec's scheduler with every setting it leaves out set.

    Its unit from the budget's (`budget_unit`), then the rest from the budget and the
    number of trials where the stop criteria give a budget in that unit, else the fixed
    fallbacks. What the spec sets is kept.

    Args:
        spec: The sweep's spec.
        space: The resolved search space.

    Returns:
        The scheduler.
    """
    sched = spec.scheduler.model_copy(update={"time_attr": budget_unit(spec)})
    if not sched.halving and sched.type != "median":
        return sched
    rules = _rules()
    budget = budget_in(spec, sched.time_attr)
    trials = search_trials(spec, space)
    derived: dict[str, Any]
    if sched.halving:
        derived = rules.asha.fallback.model_dump()
        if budget:
            derived = _asha(rules.asha, budget, trials, sched)
    else:
        median = rules.median
        derived = median.fallback.model_dump()
        if budget:
            derived = {
                "grace_period": max(1, math.floor(median.grace_fraction * budget)),
                "min_samples_required": max(2, min(median.min_samples_required, trials // 2)),
            }
    own = {k: v for k, v in sched.model_dump().items() if v is not None}
    out = SchedulerSpec.model_validate({**derived, **own})
    if out.type == "hyperband" and out.brackets is None:
        brackets = max(1, min(rules.hyperband.max_brackets, out.halving_levels()))
        out = out.model_copy(update={"brackets": brackets})
    return out


def scheduler_in_force(spec: ExperimentSpec, space: dict[str, Domain]) -> dict[str, Any]:
    """The scheduler's settings a sweep runs with, as the plan, the dry run and the page show.

    Type, time_attr and, by type, grace_period, max_t, reduction_factor and the rungs
    (ASHA's milestones in time_attr), min_samples_required, or perturbation_interval.

    Args:
        spec: The sweep's spec.
        space: The resolved search space.

    Returns:
        The settings; `derived` names those the spec left out and the budget set.
    """
    sched = resolved_scheduler(spec, space)
    own = spec.scheduler.model_dump(exclude_none=True)
    keys = {
        "asha": ("grace_period", "max_t", "reduction_factor"),
        "hyperband": ("grace_period", "max_t", "reduction_factor"),
        "median": ("grace_period", "min_samples_required"),
        "pbt": ("perturbation_interval",),
        "pb2": ("perturbation_interval",),
    }.get(sched.type, ())
    out: dict[str, Any] = {"type": sched.type}
    if sched.type != "fifo":
        out["time_attr"] = sched.time_attr
    out |= {k: getattr(sched, k) for k in keys}
    if sched.type != "fifo" and scheduler_metric(spec) != spec.metric:
        out["judged_on"] = scheduler_metric(spec)
    if sched.halving:
        out["rungs"] = sched.asha_milestones()
    if sched.type == "hyperband":
        shares = bracket_trials(search_trials(spec, space), len(sched.bracket_graces()), sched)
        out["brackets"] = [
            {"rungs": sched.asha_milestones(b), "trials": n} for b, n in enumerate(shares)
        ]
        keys = (*keys, "brackets")
    # pbt's and pb2's unit and interval are fixed defaults, not taken from the budget
    from_budget = ("time_attr", *keys) if sched.halving or sched.type == "median" else ()
    out["derived"] = [k for k in from_budget if k in out and k not in own]
    return out


def resolved_sampler(spec: ExperimentSpec, space: dict[str, Domain]) -> SamplerSpec | None:
    """Optuna's sampler with every setting the spec leaves out set, or None without optuna.

    The type the spec names, else the rules' (TPE); the random start the spec sets, else
    ceil(startup_fraction x N) within [min_startup_trials, max_startup_trials], never
    more than N.

    Args:
        spec: The sweep's spec.
        space: The resolved search space.

    Returns:
        The sampler, or None where search.method is not optuna.
    """
    if spec.search.method != "optuna":
        return None
    rules = _rules().optuna
    own = spec.search.sampler.model_dump(exclude_none=True) if spec.search.sampler else {}
    trials = search_trials(spec, space)
    startup = max(rules.min_startup_trials, math.ceil(rules.startup_fraction * trials))
    startup = min(startup, rules.max_startup_trials, trials)
    return SamplerSpec.model_validate({"type": rules.sampler, "n_startup_trials": startup, **own})


def sampler_in_force(spec: ExperimentSpec, space: dict[str, Domain]) -> dict[str, Any] | None:
    """Optuna's sampler a sweep runs with, as the plan, the dry run and the page show.

    Args:
        spec: The sweep's spec.
        space: The resolved search space.

    Returns:
        `type` and `n_startup_trials`, and `derived`: those the spec left out; None
        where search.method is not optuna.
    """
    sampler = resolved_sampler(spec, space)
    if sampler is None:
        return None
    own = spec.search.sampler.model_dump(exclude_none=True) if spec.search.sampler else {}
    out: dict[str, Any] = sampler.model_dump()
    out["derived"] = [k for k in ("type", "n_startup_trials") if k not in own]
    return out


def _asha(rules: AshaRules, budget: float, trials: int, sched: SchedulerSpec) -> dict:
    factor = sched.reduction_factor or rules.reduction_factor
    max_t = sched.max_t or max(1, math.floor(budget), sched.grace_period or 1)
    rungs = 1
    while rungs < rules.max_rungs and trials >= factor**rungs * rules.trials_per_rung:
        rungs += 1
    # rounded up: the levels above it land on max_t or a step past it, never a step
    # short (rounded down, 100 iterations made rungs at 33 and 99, and a trial stopped at
    # 99 missed its final evaluation)
    grace = max(1, math.ceil(max_t / factor ** (rungs - 1)))
    return {"max_t": max_t, "reduction_factor": factor, "grace_period": min(grace, max_t)}


def bracket_shares(brackets: int, factor: float) -> list[float]:
    """hyperband: each bracket's share of the trials, Hyperband's n_b in proportion.

    n_b = ceil(R / (R - b) x factor^(R - 1 - b)) for bracket b of R (Li et al. 2018).

    Args:
        brackets: R, the number of brackets.
        factor: The reduction factor.

    Returns:
        The shares, summing to 1, bracket 0 (the one that judges earliest) first.
    """
    weights = [
        math.ceil(brackets / (brackets - b) * factor ** (brackets - 1 - b)) for b in range(brackets)
    ]
    return [w / sum(weights) for w in weights]


def next_bracket(counts: list[int], shares: list[float]) -> int:
    """The bracket the next trial joins: the one furthest below its share.

    Its share of the trials so far and this one; the first of those tied.

    Args:
        counts: How many trials each bracket has.
        shares: Each bracket's share (bracket_shares).

    Returns:
        The bracket's index.
    """
    total = sum(counts) + 1
    behind = [share * total - count for share, count in zip(shares, counts, strict=True)]
    return behind.index(max(behind))


def bracket_trials(trials: int, brackets: int, sched: SchedulerSpec) -> list[int]:
    """hyperband: how many of `trials` each bracket gets, as the scheduler deals them.

    Args:
        trials: The sweep's search trials.
        brackets: The number of brackets.
        sched: The resolved scheduler (its reduction_factor).

    Returns:
        The trials per bracket, bracket 0 first.
    """
    shares = bracket_shares(brackets, sched.reduction_factor or 3)
    counts = [0] * brackets
    for _ in range(trials):
        counts[next_bracket(counts, shares)] += 1
    return counts
