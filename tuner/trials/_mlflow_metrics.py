"""Which numbers of a Tune result go to MLflow: the curated metric set, never the
hundreds of config keys Ray's own logger copies."""

from __future__ import annotations

import math
from typing import Any

from tuner.mlflow_names import LEARNER_WORDS, LEARNERS_PREFIX, PER_ID_METRICS, RESULT_METRICS
from tuner.trials._stoppers import lookup


def flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """A nested dict as {"a/b": value} (MLflow params and metrics are flat)."""
    out: dict[str, Any] = {}
    for key, value in d.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten(value, name + "/"))
        else:
            out[name] = value
    return out


def number(value: Any) -> float | None:
    """A finite float, or None (bools, strings, NaN and inf are not metrics)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        try:
            value = float(value)  # numpy scalars
        except (TypeError, ValueError):
            return None
    value = float(value)
    return value if math.isfinite(value) else None


def result_metrics(result: dict[str, Any], extra_keys: tuple[str, ...] = ()) -> dict[str, float]:
    """The curated metrics of one Tune result: returns (a multi-agent run's per agent and
    per policy too), lengths, steps, time, losses."""
    out: dict[str, float] = {}
    for key in (*RESULT_METRICS, *extra_keys):
        value = number(lookup(result, key))
        if value is not None:
            out[key] = value
    for group in PER_ID_METRICS:
        returns = lookup(result, group)
        per_id = returns.items() if isinstance(returns, dict) else ()
        if not per_id:  # a flat result: "<group>/<id>" keys
            per_id = [
                (k[len(group) + 1 :], v) for k, v in result.items() if k.startswith(group + "/")
            ]
        for ident, value in per_id:
            num = number(value)
            if num is not None and "/" not in str(ident):
                out[f"{group}/{ident}"] = num
    for module_id, stats in (result.get("learners") or {}).items():
        if module_id == "__all_modules__" or not isinstance(stats, dict):
            continue
        for key, value in stats.items():
            num = number(value)
            if num is not None and any(w in key for w in LEARNER_WORDS):
                out[f"{LEARNERS_PREFIX}{module_id}/{key}"] = num
    return out
