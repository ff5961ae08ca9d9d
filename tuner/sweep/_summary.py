"""A trial's view (tuner/views.py) from its Tune result, and how metric values compare."""

from __future__ import annotations

import math
from typing import Any

from tuner.mlflow_names import ITERATION_KEY, STAGE_SEARCH, STEP_KEY
from tuner.results import lookup
from tuner.rllib import seed_of
from tuner.views import TrialView


def _finite(value: Any) -> float | None:
    if isinstance(value, int | float) and math.isfinite(value):
        return float(value)
    return None


def trial_view_from_result(
    trial_id: str,
    status: str,
    result: dict[str, Any],
    *,
    sampled: dict[str, Any],
    metric: str,
    base_seed: int,
    best_metric: float | None = None,
    last_metric: float | None = None,
    score: float | None = None,
    stage: str = STAGE_SEARCH,
    error: str | None = None,
    config: dict[str, Any] | None = None,
) -> TrialView:
    """A TrialView from the last (nested or flat) Tune result of a trial. Its seed is the
    one the trial reports (RLlib trials), else the one its `config` gives it (a
    confirmation trial's own; a search trial's spec seed + index)."""
    info = result.get("tuner") or {
        k: lookup(result, f"tuner/{k}") for k in ("seed", "node_id", "device")
    }
    seed = info.get("seed")
    return TrialView(
        trial_id=trial_id,
        status=status,
        config=sampled,
        seed=seed if seed is not None else seed_of(config or {}, trial_id, base_seed),
        iterations=int(result.get(ITERATION_KEY) or 0),
        env_steps=int(result.get(STEP_KEY) or 0),
        # an iteration that finished no episode reports no return: the last value carries
        metric=_finite(lookup(result, metric)) if last_metric is None else last_metric,
        best_metric=best_metric,
        score=score,
        stage=stage,
        error=error,
        node_id=info.get("node_id"),
        node_ip=result.get("node_ip"),
        device=info.get("device"),
    )
