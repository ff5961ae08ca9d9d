"""Sweeps side by side (`GET /api/v1/compare?ids=A,B`, `tuner compare A B`): each one's
best config, with the keys whose values differ named, its confirmed mean and CI where
it has one, its best trial's learning curve, its hyperparameter importance and its
MLflow links."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from tuner.errors import TunerError
from tuner.store import Store
from tuner.views import BestTrial, ConfirmedConfig, ExperimentView, MlflowLinks

MOST = 4  # sweeps on one comparison


class CurvePoint(BaseModel):
    """One iteration of the best trial's metric."""

    env_steps: int
    value: float


class ComparedSweep(BaseModel):
    """One sweep of a comparison."""

    id: str
    name: str
    status: str
    algorithm: str
    env: str
    metric: str
    mode: str
    scope: str = Field(
        ...,
        description="How its best's score was taken (its BestTrial's scope: "
        "`final-evaluation`, or the spec's scope of the metric); without a best, the spec's.",
    )
    best: BestTrial | None = None
    confirmed: ConfirmedConfig | None = Field(
        None, description="Its best config over fresh seeds (mean, 95 % CI), where confirmed."
    )
    importance: dict[str, float] = Field(default_factory=dict)
    curve: list[CurvePoint] = Field(
        default_factory=list, description="Its best trial's metric per iteration."
    )
    mlflow: MlflowLinks | None = None


class Comparison(BaseModel):
    """Sweeps side by side, in the order asked."""

    sweeps: list[ComparedSweep]
    keys: list[str] = Field(..., description="Every key of their best configs.")
    differing_keys: list[str] = Field(
        ...,
        description="The keys whose best values differ between the sweeps (or that "
        "some sweep's best config lacks).",
    )


class UnknownSweep(TunerError, LookupError):
    """A sweep id the store does not have."""


def compare(store: Store, ids: list[str]) -> Comparison:
    """The comparison of the sweeps `ids` (2 to MOST, distinct); UnknownSweep names one
    the store does not have."""
    sweeps = []
    for sweep_id in ids:
        rec = store.get_experiment(sweep_id)
        if rec is None:
            raise UnknownSweep(sweep_id)
        view = ExperimentView.from_record(rec, store.trial_counts(rec.id))
        best = view.best
        curve: list[CurvePoint] = []
        if best is not None:
            for point in store.metric_history(rec.id, best.trial_id, keys=[view.metric]):
                value = point.values.get(view.metric)
                if value is not None:
                    curve.append(CurvePoint(env_steps=point.env_steps, value=value))
        sweeps.append(
            ComparedSweep(
                id=view.id,
                name=view.name,
                status=str(view.status),
                algorithm=view.algorithm,
                env=view.env,
                metric=view.metric,
                mode=view.mode,
                scope=best.scope if best is not None else str(view.spec.get("scope", "last-5-avg")),
                best=best,
                confirmed=best.confirmed if best else None,
                importance=dict(view.importance or {}),
                curve=curve,
                mlflow=view.mlflow,
            )
        )
    configs = [s.best.config if s.best else {} for s in sweeps]
    keys = sorted({k for c in configs for k in c})
    missing = object()

    def differs(key: str) -> bool:
        values: list[Any] = [c.get(key, missing) for c in configs]
        return any(v != values[0] for v in values[1:])

    return Comparison(sweeps=sweeps, keys=keys, differing_keys=[k for k in keys if differs(k)])


__all__ = ["MOST", "ComparedSweep", "Comparison", "CurvePoint", "UnknownSweep", "compare"]
