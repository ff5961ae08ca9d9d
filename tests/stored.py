"""Finished sweeps written through the real store, as a driver leaves them: a trial with
its metric over three iterations and the sweep's best (and, where given, its confirmed
mean), for the tests of views that read finished sweeps (compare: REST, CLI, page)."""

from __future__ import annotations

from typing import Any

METRIC = "env_runners/episode_return_mean"


def stored_sweep(
    store: Any,
    spec: dict[str, Any],
    config: dict[str, Any],
    score: float,
    confirmed: float | None = None,
) -> str:
    """A finished sweep of one trial: its metric rising to `score` over 3 iterations of
    100 env steps, its best `config` at `score`; with `confirmed`, confirmed on 2 seeds at
    that mean, CI [mean - 1, mean + 1]. Returns its id."""
    from tuner.store import MetricPoint
    from tuner.views import BestTrial, ConfirmedConfig

    name = spec["name"]
    # ended as it is created: a live server's supervisor never sees it QUEUED
    rec = store.create_experiment(name=name, spec=spec, warnings=[], ended="STOPPED")
    trial = f"{name}_00000"
    store.upsert_trial(rec.id, trial, status="TERMINATED", config=config, score=score)
    points = [
        MetricPoint(iteration=k, env_steps=100 * k, values={METRIC: score * k / 3})
        for k in (1, 2, 3)
    ]
    store.add_metric_points(rec.id, trial, points)
    best = BestTrial(trial_id=trial, config=config, full_config=config, metric_value=score)
    if confirmed is not None:
        best.confirmed = ConfirmedConfig(
            trial_id=trial,
            config=config,
            seeds=[7, 8],
            scores=[confirmed - 1, confirmed + 1],
            mean=confirmed,
            ci95=[confirmed - 1, confirmed + 1],
        )
    store.update_experiment(rec.id, best=best.model_dump(mode="json"))
    return rec.id


def earlier_sweep(source: str, spec: Any, trials: list[Any]) -> Any:
    """An earlier sweep as a warm start reads it back from MLflow (tuner.tracking's
    EarlierSweep): `spec` (an ExperimentSpec) and its finished `trials` (TrialViews),
    named `source`."""
    from tuner.tracking import EarlierSweep

    return EarlierSweep(
        source=source,
        run_name=f"{source}-run",
        parent_run_id="p",
        experiment_id="1",
        spec=spec,
        trials=trials,
    )
