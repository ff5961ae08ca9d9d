"""A warm start (`search.warm_start`): an earlier sweep's finished trials, mapped onto
this sweep's space by key name. Its best `top_k` configs run first; with optuna, every
finished trial of the same algorithm and metric is told to the sampler with its score.
Keys this space does not search, and values outside its ranges, are dropped and said."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from tuner.mlflow_names import STAGE_SEARCH
from tuner.results import better
from tuner.rllib import apply_values, config_path
from tuner.search_spaces import Domain
from tuner.spec import ExperimentSpec, SpecError
from tuner.statuses import TrialStatus
from tuner.tracking import EarlierSweep


class WarmStart(BaseModel):
    """What a sweep reuses of an earlier one."""

    source: str = Field(..., description="The earlier sweep's run name.")
    parent_run_id: str
    first: list[dict[str, Any]] = Field(
        default_factory=list, description="The configs that run first (space keys)."
    )
    known: list[tuple[dict[str, Any], float]] = Field(
        default_factory=list, description="(config, score) told to Optuna."
    )
    warnings: list[str] = Field(default_factory=list)


def warm_start(spec: ExperimentSpec, space: dict[str, Domain], earlier: EarlierSweep) -> WarmStart:
    """The earlier sweep's finished search trials, best first, mapped onto `space`."""
    ws = spec.search.warm_start
    assert ws is not None
    loc = "search.warm_start.from"
    if earlier.spec.base_algorithm != spec.base_algorithm:
        raise SpecError.one(
            loc,
            f"sweep {ws.from_!r} ran {earlier.spec.algorithm}, this one "
            f"{spec.algorithm}: a warm start reuses a sweep of the same algorithm",
            ws.from_,
        )
    out = WarmStart(source=earlier.run_name, parent_run_id=earlier.parent_run_id)
    if earlier.spec.env != spec.env:
        out.warnings.append(
            f"warm start from {ws.from_!r}: it ran on {earlier.spec.env}, this sweep on "
            f"{spec.env}; its configs are reused, its scores are of the other env"
        )
    mode = earlier.spec.mode
    done = [
        t
        for t in earlier.trials
        if t.stage == STAGE_SEARCH and t.status == TrialStatus.TERMINATED and t.score is not None
    ]
    ranked: list[Any] = []
    for trial in done:
        at = next((i for i, r in enumerate(ranked) if better(trial.score, r.score, mode)), None)
        ranked.insert(len(ranked) if at is None else at, trial)
    dropped: dict[str, str] = {}
    mapped: list[tuple[dict[str, Any], float]] = []
    for trial in ranked:
        values = {}
        for key, value in trial.config.items():
            dom = space.get(key)
            if dom is None:
                dropped[key] = "not searched here"
            elif not dom.contains(value):
                dropped[key] = f"a value outside {dom}"
            else:
                values[key] = value
        mapped.append((values, float(trial.score)))
    filled: set[str] = set()
    for values, _ in mapped:
        # Tune's searchers take whole points: a key it lacks takes this space's middle
        whole = {**{k: middle(d) for k, d in space.items() if k not in values}, **values}
        if values and whole not in out.first and len(out.first) < ws.top_k:
            filled |= set(space) - set(values)
            out.first.append(whole)
    same_goal = (earlier.spec.metric, mode) == (spec.metric, spec.mode)
    if spec.search.method == "optuna" and same_goal:
        out.known = [(v, s) for v, s in mapped if set(v) == set(space)]
    if dropped:
        each = ", ".join(f"{k} ({why})" for k, why in sorted(dropped.items()))
        out.warnings.append(f"warm start from {ws.from_!r}: dropped {each}")
    if filled:
        out.warnings.append(
            f"warm start from {ws.from_!r}: {', '.join(sorted(filled))} set to the middle "
            "of this space where an earlier config has none"
        )
    out.warnings.append(
        f"warm start from {ws.from_!r} (run {earlier.run_name}): {len(out.first)} of its "
        f"{len(done)} finished configs run first"
        + (f", {len(out.known)} told to Optuna with their scores" if out.known else "")
        + ("" if same_goal else f" (it ranked by {earlier.spec.metric}: no scores reused)")
    )
    return out


def middle(dom: Domain) -> Any:
    """A value in the middle of a domain: the middle choice; the midpoint of a range (in
    log space for loguniform; rounded for randint and quniform)."""
    import math

    kind, args = dom.kind, dom.args
    if kind in ("choice", "grid"):
        return args[len(args) // 2]
    low, high = args[0], args[1]
    if kind == "loguniform":
        return math.exp((math.log(low) + math.log(high)) / 2)
    mid = (low + high) / 2
    if kind == "randint":
        return int(round(mid))
    if kind == "quniform":
        return round(mid / args[2]) * args[2]
    return mid


def flat_point(params: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """A config of space keys as Tune's searchers take a point: the flattened path of
    each key in the trial's config dict `params` ("_model_config/fcnet_hiddens")."""
    laid = apply_values(params, values)
    out = {}
    for key in values:
        path = config_path(key, params)
        node: Any = laid
        for part in path:
            node = node[part]
        out["/".join(path)] = node
    return out


def nested_point(params: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """The same as a nested dict (Tune's BasicVariantGenerator takes that)."""
    out: dict[str, Any] = {}
    for flat, value in flat_point(params, values).items():
        node = out
        *parents, last = flat.split("/")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    return out


__all__ = ["WarmStart", "flat_point", "nested_point", "warm_start"]
