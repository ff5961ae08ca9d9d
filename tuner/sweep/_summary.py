"""A trial's view (tuner/views.py) from its Tune result, and how metric values compare."""

from __future__ import annotations

import math
from typing import Any

from tuner.mlflow_names import ITERATION_KEY, STAGE_SEARCH, STEP_KEY
from tuner.results import lookup
from tuner.rllib import seed_of
from tuner.spec import ExperimentSpec
from tuner.views import TrialView

# where RLlib reports an evaluation's results
EVALUATION_PREFIX = "evaluation/"


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


def final_score_key(spec: ExperimentSpec) -> str | None:
    """The result key of a trial's final deterministic evaluation where the sweep ranks
    trials by it: evaluation.at_end with a training metric (not `evaluation/...`, which
    ranks by scope as it is), one objective. None where scores are the metric under
    scope."""
    if not spec.evaluation.at_end or spec.metric.startswith(EVALUATION_PREFIX):
        return None
    if spec.objectives:  # a Pareto front weighs each objective as reported
        return None
    return f"{EVALUATION_PREFIX}{spec.metric}"


def final_score(spec: ExperimentSpec, history: Any, key: str) -> float | None:
    """A trial's final deterministic evaluation (`key` in its last result) where it ran
    its budget (stop.timesteps_total or stop.training_iteration reached); None for a
    trial stopped short of it, or without that evaluation."""
    if history is None or key not in history or not len(history):
        return None
    last = history.iloc[-1]
    stop = spec.stop
    steps, iterations = last.get(STEP_KEY) or 0, last.get(ITERATION_KEY) or 0
    ran = (stop.timesteps_total and steps >= stop.timesteps_total) or (
        stop.training_iteration and iterations >= stop.training_iteration
    )
    return _finite(last.get(key)) if ran else None
