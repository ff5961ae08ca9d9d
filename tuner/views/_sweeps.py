"""A sweep: `tuner run --output json`, the service's view of one and a page of them,
and where it landed in MLflow."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import Field, PrivateAttr

from tuner.statuses import SweepStatus
from tuner.views._answer import BestTrial, ConfirmedConfig, ParetoMember
from tuner.views._base import _View
from tuner.views._trials import TrialView


class MlflowLinks(_View):
    """Where a sweep landed in MLflow."""

    experiment_id: str
    parent_run_id: str
    best_run_id: str | None = None
    model_version: str | None = Field(
        None, description="models:/<name>/<version> of the best checkpoint."
    )
    url: str | None = None


# Fields a sweep has both in `tuner run --output json` and in the service's view.
Confirmation = Annotated[
    list[ConfirmedConfig],
    Field(default_factory=list, description="The confirmed configs, best mean first."),
]
Importance = Annotated[
    dict[str, float],
    Field(
        default_factory=dict,
        description="Per sampled key, how much it mattered for the metric: the share of the "
        "metric's variance its value explains over the finished search trials (fANOVA), "
        "largest first, summing to 1 (0: its value never changed). Empty until enough trials "
        "finished (tuner/importance.py).",
    ),
]
ImportancePedAnova = Annotated[
    dict[str, float],
    Field(
        default_factory=dict,
        description="The same keys by PED-ANOVA: how far each key's values among the best "
        "trials are from its values among all of them (what it takes to reach the top).",
    ),
]

Pareto = Annotated[
    list[ParetoMember],
    Field(
        default_factory=list,
        description="With `objectives`: the search trials no other finished trial beats on "
        "every objective, best first objective first; empty without them.",
    ),
]


RankedBy = Annotated[
    str | None,
    Field(
        None,
        description="The result key trials' scores come from: evaluation/<metric>, the "
        "final deterministic evaluation (the default with a budget), or the metric itself.",
    ),
]


class SweepSummary(_View):
    """`tuner run --output json`: the best trial and every trial."""

    name: str
    status: SweepStatus = Field(..., description="The sweep's outcome: a terminal status.")
    metric: str
    mode: str
    ranked_by: RankedBy
    best: BestTrial | None = None
    pareto: Pareto
    trials: list[TrialView] = Field(default_factory=list)
    confirmation: Confirmation
    importance: Importance
    importance_ped_anova: ImportancePedAnova
    warnings: list[str] = Field(default_factory=list)
    path: str | None = Field(None, description="Tune experiment directory.")
    mlflow: MlflowLinks | None = None
    # each trial's Tune config by trial id (what the answer's full_config derives from)
    _tune_configs: dict[str, dict[str, Any]] = PrivateAttr(default_factory=dict)

    def tune_config(self, trial_id: str) -> dict[str, Any]:
        """A trial's Tune config as it ran.

        Args:
            trial_id: The trial's id.

        Returns:
            Its Tune config, or {} when not known.
        """
        return self._tune_configs.get(trial_id, {})


class ExperimentView(_View):
    """One sweep of the service (`GET /experiments/{id}`)."""

    id: str
    name: str
    status: SweepStatus
    algorithm: str
    env: str
    metric: str
    mode: str
    spec: dict[str, Any]
    warnings: list[str] = Field(default_factory=list)
    trial_counts: dict[str, int] = Field(
        default_factory=dict, description="How many of its trials are in each TrialStatus."
    )
    best: BestTrial | None = None
    pareto: Pareto
    confirmation: Confirmation
    importance: Importance
    importance_ped_anova: ImportancePedAnova
    mlflow: MlflowLinks | None = None
    scheduler: dict[str, Any] = Field(
        default_factory=dict,
        description="The scheduler's settings in force, as the plan shows them.",
    )
    error: str | None = None
    attempts: int = 0
    job_id: str | None = None
    created_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None

    @classmethod
    def from_record(
        cls, rec: Any, trial_counts: dict[str, int], scheduler: dict[str, Any] | None = None
    ) -> ExperimentView:
        """The view of a stored sweep.

        Args:
            rec: The stored sweep (a tuner.store.ExperimentRecord).
            trial_counts: How many of its trials are in each TrialStatus.
            scheduler: The settings in force of its spec's scheduler.

        Returns:
            The sweep's view.
        """
        spec = rec.spec
        return cls(
            id=rec.id,
            name=rec.name,
            status=rec.status,
            algorithm=spec.get("algorithm", ""),
            env=spec.get("env") or "",
            metric=spec.get("metric", ""),
            mode=spec.get("mode", "max"),
            spec=spec,
            warnings=rec.warnings,
            trial_counts=trial_counts,
            best=rec.best,
            confirmation=getattr(rec, "confirmation", None) or [],
            pareto=getattr(rec, "pareto", None) or [],
            importance=getattr(rec, "importance", None) or {},
            importance_ped_anova=getattr(rec, "importance_ped_anova", None) or {},
            mlflow=rec.mlflow,
            scheduler=scheduler or {},
            error=rec.error,
            attempts=rec.attempts,
            job_id=rec.job_id,
            created_at=rec.created_at,
            started_at=rec.started_at,
            finished_at=rec.finished_at,
        )


class ExperimentList(_View):
    """A page of sweeps, newest first."""

    items: list[ExperimentView]
    total: int
    limit: int
    offset: int
