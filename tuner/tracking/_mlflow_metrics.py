"""Which numbers of a Tune result go to MLflow: the curated metric set, never the
hundreds of config keys Ray's own logger copies."""

from __future__ import annotations

import math
from functools import cache
from typing import Any

from tuner.mlflow_names import LEARNER_WORDS, LEARNERS_PREFIX, PER_ID_METRICS, RESULT_METRICS
from tuner.results import lookup


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


@cache
def _rllib_metric_names() -> frozenset[str]:
    """Every metric name RLlib itself reports (the constants of ray.rllib.utils.metrics)."""
    import ray.rllib.utils.metrics as rllib_metrics

    return frozenset(
        v for k, v in vars(rllib_metrics).items() if k.isupper() and isinstance(v, str)
    )


# What Tune adds to every result by itself (ray/tune/result.py's auto-filled keys).
_TUNE_BOOKKEEPING = frozenset(
    {
        "timestamp",
        "pid",
        "hostname",
        "node_ip",
        "date",
        "done",
        "trial_id",
        "time_since_restore",
        "iterations_since_restore",
        "timesteps_since_restore",
        "checkpoint_dir_name",
        "should_checkpoint",
    }
)


def custom_metrics(result: dict[str, Any]) -> dict[str, float]:
    """What user code reported: for an RLlib result, what callbacks logged through
    RLlib's metrics logger (the numbers directly under `env_runners/` and
    `evaluation/env_runners/` that are not RLlib's own); for a training loop of your own
    (no `env_runners`), every number it reported (nested dicts as `a/b`)."""
    out: dict[str, float] = {}
    flat = flatten(result)  # nested or already flat ("env_runners/x"), the same keys
    rllib = any(k.startswith("env_runners/") for k in flat)
    own = _rllib_metric_names()
    for key, value in flat.items():
        num = number(value)
        if num is None:
            continue
        if not rllib:
            if key.split("/")[0] not in _TUNE_BOOKKEEPING | {"config"}:
                out[key] = num
            continue
        for prefix in ("env_runners/", "evaluation/env_runners/"):
            name = key[len(prefix) :] if key.startswith(prefix) else ""
            if name and "/" not in name and name not in own:
                out[key] = num
    return out


def result_metrics(result: dict[str, Any], extra_keys: tuple[str, ...] = ()) -> dict[str, float]:
    """The curated metrics of one Tune result.

    Returns, lengths, steps, time, losses, and whatever the spec's callbacks logged
    (custom_metrics).

    Args:
        result: Tune's result.
        extra_keys: Further result keys to log.

    Returns:
        Each metric's value, by MLflow name.
    """
    out: dict[str, float] = custom_metrics(result)
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
