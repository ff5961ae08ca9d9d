"""A sweep's trials and their metrics: the trials list, one trial's per-iteration
metrics, one metric of every trial (learning curves). Thin: the work is in the store."""

from __future__ import annotations

from typing import Annotated

from fastapi import HTTPException, Path, Query, Response

from tuner.api._deps import SettingsDep, StoreDep, ViewCacheDep
from tuner.api._shared import NOT_FOUND, ExperimentId, guarded_router, sweep_or_404
from tuner.mlflow_names import RETURN_KEY
from tuner.views import MetricSeries, TrialList, TrialMetrics, with_mlflow_url

router = guarded_router()


@router.get(
    "/experiments/{experiment_id}/trials",
    response_model=TrialList,
    responses=NOT_FOUND,
    tags=["experiments"],
)
async def list_trials(
    experiment_id: ExperimentId, store: StoreDep, settings: SettingsDep, cache: ViewCacheDep
) -> Response:
    """Every trial: status, sampled values, progress, metric, error, node, MLflow run."""

    def render() -> TrialList:
        rec = sweep_or_404(store, experiment_id)
        mlflow_exp = (rec.mlflow or {}).get("experiment_id")
        items = [
            with_mlflow_url(t, settings.mlflow_ui_url, mlflow_exp)
            for t in store.list_trials(experiment_id)
        ]
        return TrialList(items=items)

    return await cache.get(f"{experiment_id}/trials", render)


@router.get(
    "/experiments/{experiment_id}/trials/{trial_id}/metrics",
    response_model=TrialMetrics,
    responses=NOT_FOUND,
    tags=["experiments"],
)
def trial_metrics(
    experiment_id: ExperimentId,
    trial_id: Annotated[str, Path(description="The trial's id, as the sweep's trials list it.")],
    store: StoreDep,
    keys: Annotated[str | None, Query(description="Comma-separated metric keys.")] = None,
) -> TrialMetrics:
    """A trial's per-iteration metrics."""
    sweep_or_404(store, experiment_id)
    if store.get_trial(experiment_id, trial_id) is None:
        raise HTTPException(404, detail=f"no trial {trial_id!r} in sweep {experiment_id!r}")
    wanted = [k for k in keys.split(",") if k] if keys else None
    points = store.metric_history(experiment_id, trial_id, keys=wanted)
    return TrialMetrics(trial_id=trial_id, points=points)


@router.get(
    "/experiments/{experiment_id}/metrics",
    response_model=MetricSeries,
    responses=NOT_FOUND,
    tags=["experiments"],
)
async def metric_series(
    experiment_id: ExperimentId,
    store: StoreDep,
    cache: ViewCacheDep,
    key: Annotated[
        str | None,
        Query(description="Metric key; default the spec metric.", max_length=200),
    ] = None,
) -> Response:
    """One metric of every trial, for learning curves: trial_id -> [[env_steps, value]]
    (served from a short cache, as the sweep and trial views)."""

    def render() -> MetricSeries:
        rec = sweep_or_404(store, experiment_id)
        name = key or rec.spec.get("metric", RETURN_KEY)
        return MetricSeries(key=name, series=store.metric_series(experiment_id, name))

    return await cache.get(f"{experiment_id}/metrics/{key or ''}", render)
