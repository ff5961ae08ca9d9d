"""Several objectives (`objectives`): each trial's value of every objective under the
spec's scope, the Pareto front of the search trials, and each confirmed config's mean
of every objective over its seeds."""

from __future__ import annotations

import math
from typing import Any

from tuner.mlflow_names import STAGE_SEARCH
from tuner.results import pareto_front, scope_value
from tuner.spec import ExperimentSpec
from tuner.views import ConfirmedConfig, ParetoMember, TrialView


def objective_values(spec: ExperimentSpec, history: Any) -> dict[str, float | None] | None:
    """Each objective's value under scope from a trial's metric history (a DataFrame,
    carried over iterations without the metric, as the score is); None without
    objectives. A metric the trial never reported is None."""
    if not spec.objectives:
        return None
    out: dict[str, float | None] = {}
    for objective in spec.objectives:
        if history is None or objective.metric not in history:
            out[objective.metric] = None
            continue
        values = list(history[objective.metric].ffill().dropna())
        out[objective.metric] = scope_value(values, spec.scope, objective.mode)
    return out


def _complete(values: dict[str, float | None] | None, metrics: list[str]) -> list[float] | None:
    if not values:
        return None
    row = [values.get(m) for m in metrics]
    if any(v is None or not math.isfinite(v) for v in row):
        return None
    return [float(v) for v in row if v is not None]


def front(spec: ExperimentSpec, trials: list[TrialView]) -> list[ParetoMember]:
    """The search trials that no other search trial with every objective's value beats
    on all of them, best first objective first (ties by the next objectives, then by
    trial id); empty without objectives. A trial that misses an objective's value is not
    ranked."""
    if not spec.objectives:
        return []
    metrics = [o.metric for o in spec.objectives]
    modes = [o.mode for o in spec.objectives]
    ranked = [
        (t, row)
        for t in trials
        if t.stage == STAGE_SEARCH and (row := _complete(t.values, metrics)) is not None
    ]
    keep = pareto_front([row for _, row in ranked], modes)
    signs = [-1 if mode == "max" else 1 for mode in modes]  # each objective, best first

    def order(pair: tuple[TrialView, list[float]]) -> tuple:
        return (*(s * v for s, v in zip(signs, pair[1], strict=True)), pair[0].trial_id)

    members = sorted((ranked[i] for i in keep), key=order)
    return [
        ParetoMember(
            trial_id=t.trial_id,
            config=t.config,
            values=dict(zip(metrics, row, strict=True)),
            checkpoint=t.checkpoint,
            mlflow_run_id=t.mlflow_run_id,
        )
        for t, row in members
    ]


def missing_values(spec: ExperimentSpec, trials: list[TrialView]) -> str | None:
    """A warning naming the objectives search trials did not report (they are not on
    the front: a typo in a metric leaves it empty); None when every trial has them."""
    if not spec.objectives:
        return None
    search = [t for t in trials if t.stage == STAGE_SEARCH and t.values is not None]
    missing = {
        o.metric: sum((t.values or {}).get(o.metric) is None for t in search)
        for o in spec.objectives
    }
    missed = {m: n for m, n in missing.items() if n}
    if not missed:
        return None
    each = ", ".join(f"{m} in {n} of {len(search)}" for m, n in missed.items())
    return (
        f"objectives without a value ({each} search trials): those trials are not on "
        "the Pareto front; is each metric a key the trials report?"
    )


def confirmed_values(
    spec: ExperimentSpec,
    confirmed: list[ConfirmedConfig],
    trials: list[TrialView],
    members: list[ParetoMember],
) -> None:
    """Sets each confirmed config's `values`: per objective, the mean over its seeds'
    trials that have it (the first objective's is the confirmed `mean`, the score each
    seed was judged by); and each front member's `confirmed`."""
    if not spec.objectives:
        return
    by_id = {t.trial_id: t for t in trials}
    for config in confirmed:
        values: dict[str, float | None] = {}
        for i, objective in enumerate(spec.objectives):
            if i == 0:
                values[objective.metric] = config.mean
                continue
            seen = [
                v
                for tid in config.trials
                if tid in by_id
                and (v := (by_id[tid].values or {}).get(objective.metric)) is not None
                and math.isfinite(v)
            ]
            values[objective.metric] = sum(seen) / len(seen) if seen else None
        config.values = values
    by_trial = {c.trial_id: c for c in confirmed}
    for member in members:
        member.confirmed = by_trial.get(member.trial_id)
