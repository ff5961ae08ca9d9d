"""The shapes users see, one model per concept: a sweep, a trial, the best trial, the
MLflow links, metric points, the cluster (an algorithm's: tuner/algorithms/_info.py).

`tuner run --output json`, every REST response and the web page use these models and
no others: the driver builds them from Tune's results, the store converts its rows to
them once, the routes return them. Nothing here imports Ray, FastAPI or SQLAlchemy.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, WithJsonSchema

from tuner import statuses
from tuner.mlflow_names import STAGE_CONFIRM, STAGE_SEARCH, run_url
from tuner.statuses import SweepStatus, TrialStatus


class _View(BaseModel):
    model_config = ConfigDict(from_attributes=True, protected_namespaces=())


class TrialView(_View):
    """One trial (CLI JSON, `GET /experiments/{id}/trials`, the page's trial table)."""

    trial_id: str
    status: TrialStatus
    config: dict[str, Any] = Field(default_factory=dict, description="Its sampled values.")
    seed: int | None = None
    iterations: int = 0
    env_steps: int = 0
    metric: float | None = Field(
        None,
        description="The metric's last value (carried over iterations that finished no "
        "episode; null only before the first episode ended).",
    )
    best_metric: float | None = Field(None, description="The metric's peak over all iterations.")
    score: float | None = Field(
        None,
        description="The value trials are ranked by: with evaluation.at_end (the default "
        "with a budget) and a training metric, the final deterministic evaluation of a "
        "trial that ran its budget (null for one stopped early: it ranks below); else "
        "the metric under the spec's scope.",
    )
    train_score: float | None = Field(
        None,
        description="The training metric (stochastic actions) under the spec's scope: "
        "what the scheduler and the search saw every iteration.",
    )
    values: dict[str, float | None] | None = Field(
        None,
        description="With `objectives`: each objective's value under the spec's scope, by "
        "metric (the first objective's is `score`); null without them.",
    )
    stage: str = Field(
        STAGE_SEARCH,
        description="search: a trial of the search; confirm: a config re-run on a "
        "fresh seed by the confirmation stage.",
    )
    error: str | None = Field(
        None, description="Its last error (also of a failure it was retried after)."
    )
    retries: int = Field(
        0,
        description="How many times it was restarted after a failure (its process, actor or "
        "node died, or it raised), from its last checkpoint: up to the spec's max_failures, "
        "and once more on each resume of the sweep.",
    )
    node_id: str | None = None
    node_ip: str | None = None
    device: str | None = None
    checkpoint: str | None = None
    mlflow_run_id: str | None = None
    mlflow_url: str | None = Field(None, description="Its MLflow run in the UI (service only).")
    experiment_id: str | None = Field(None, description="Its sweep (service only).")
    updated_at: datetime | None = Field(None, description="Last change (service only).")


class ConfirmedConfig(_View):
    """One of the search's best configs, re-run on fresh seeds (the confirmation stage)."""

    trial_id: str = Field(..., description="The search trial whose config this is.")
    config: dict[str, Any] = Field(..., description="Its sampled values.")
    seeds: list[int] = Field(..., description="The fresh seeds it ran with.")
    scores: list[float | None] = Field(
        ...,
        description="Per seed: the final evaluation's mean return where `evaluation` is "
        "set, else the trial's metric under the spec's scope (null: the trial failed).",
    )
    mean: float | None = None
    std: float | None = Field(None, description="Sample standard deviation over seeds.")
    ci95: list[float] | None = Field(
        None, description="95 % bootstrap confidence interval of the mean: [low, high]."
    )
    iqm: float | None = Field(None, description="Interquartile mean (rliable).")
    trials: list[str] = Field(default_factory=list, description="Its confirmation trial ids.")
    median_trial_id: str | None = Field(
        None,
        description="The confirmation trial with the median score (its checkpoint is "
        "the one registered in MLflow); of an even number of scores, the worse of the two "
        "middle ones.",
    )
    checkpoint: str | None = Field(None, description="That trial's checkpoint.")
    values: dict[str, float | None] | None = Field(
        None,
        description="With `objectives`: each objective's mean over the seeds, by metric: "
        "the first objective's is `mean` (of the seeds' scores), the others' the mean of "
        "each seed's value under the spec's scope; null without them.",
    )


class ParetoMember(_View):
    """A search trial on the Pareto front of a sweep with several objectives."""

    trial_id: str
    config: dict[str, Any] = Field(..., description="Its sampled values.")
    values: dict[str, float] = Field(
        ..., description="Each objective's value under the spec's scope, by metric."
    )
    checkpoint: str | None = None
    mlflow_run_id: str | None = None
    confirmed: ConfirmedConfig | None = Field(
        None, description="Its confirmation on fresh seeds, where it was re-run."
    )


class SearchBest(_View):
    """The search's best trial by its score under the spec's scope, kept beside the
    confirmed answer under its own name."""

    trial_id: str
    config: dict[str, Any] = Field(..., description="Its sampled values.")
    seed: int | None = None
    metric_value: float = Field(..., description="Its score (see TrialView.score).")
    train_score: float | None = Field(None, description="Its training metric under scope.")
    scope: str = Field("last-5-avg", description="How trials were ranked (the spec's scope).")
    checkpoint: str | None = None


class BestTrial(_View):
    """The sweep's answer: the config to use, its score, and the checkpoint (and model
    version) that comes with it. With a confirmation, the config that ranked first over
    fresh seeds; without one, the search's best trial. tuner.sweep decides it once
    (`the_answer`) and every surface shows this."""

    trial_id: str = Field(
        ..., description="The search trial whose config this is (with a confirmation too)."
    )
    source: str = Field(
        STAGE_SEARCH,
        json_schema_extra={"enum": [STAGE_CONFIRM, STAGE_SEARCH]},
        description="confirm: the config with the best mean over fresh seeds; "
        "search: the search's best trial by its score (no confirmation ran or finished).",
    )
    config: dict[str, Any] = Field(..., description="Its sampled values.")
    full_config: dict[str, Any] = Field(
        default_factory=dict,
        description="The fixed settings, what the trial derived (a held "
        "training_intensity) and the sampled values together: paste under a spec's "
        "`config` to rerun it.",
    )
    resources: dict[str, Any] = Field(
        default_factory=dict,
        description="Resources the trial ran with that the spec left to a performance "
        "default (num_envs_per_env_runner): paste under the spec's `resources`, with "
        "full_config under `config`, to rerun it as it ran.",
    )
    seed: int | None = Field(
        None,
        description="The seed of the run its checkpoint comes from (with a confirmation: "
        "the median-score seed's).",
    )
    metric_value: float = Field(
        ...,
        description="Its search trial's score (its final deterministic evaluation, or "
        "the metric under scope: see TrialView.score).",
    )
    train_score: float | None = Field(
        None, description="Its search trial's training metric under scope."
    )
    scope: str = Field("last-5-avg", description="How trials were ranked (the spec's scope).")
    checkpoint: str | None = Field(
        None,
        description="The checkpoint to deploy: with a confirmation, its median-score seed's "
        "(the one registered in MLflow); else the search trial's best.",
    )
    checkpoint_trial_id: str | None = Field(
        None, description="The trial that checkpoint comes from."
    )
    model_version: str | None = Field(
        None, description="models:/<name>/<version> registered from that checkpoint."
    )
    mlflow_run_id: str | None = None
    confirmed: ConfirmedConfig | None = Field(
        None, description="With confirmation: its scores over fresh seeds (mean, CI, IQM)."
    )
    search_best: SearchBest | None = Field(
        None,
        description="With confirmation: the search's best trial by its score under scope "
        "(it can be another config: a single seed's winner is often luck).",
    )


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
        """A trial's Tune config as it ran ({} when not known)."""
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
        """The view of a stored sweep (a tuner.store.ExperimentRecord); `scheduler`: the
        settings in force of its spec's scheduler."""
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


class TrialList(_View):
    """Every trial of a sweep."""

    items: list[TrialView]


class MetricPoint(_View):
    """One iteration of one trial: its step counts and reported metric values."""

    iteration: int
    env_steps: int = 0
    time_s: float = 0.0
    values: dict[str, float] = Field(default_factory=dict)


class TrialMetrics(_View):
    """A trial's metric history."""

    trial_id: str
    points: list[MetricPoint]


# [env_steps, value]. Declared as an array of two numbers rather than pydantic's
# `prefixItems` tuple: schema-driven clients that turn `prefixItems` into draft-4 `items`
# lists (schemathesis 4) then reject the 3.1 document.
StepValue = Annotated[
    tuple[int, float],
    WithJsonSchema({"type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 2}),
]


class MetricSeries(_View):
    """One metric of every trial: trial_id -> [[env_steps, value], ...]."""

    key: str
    series: dict[str, list[StepValue]]


class NodeView(_View):
    """One alive Ray node and what it offers trials."""

    node_id: str
    node_ip: str | None = None
    is_head: bool = False
    cpus: float = 0
    gpus: float = 0
    resources: dict[str, float] = Field(
        default_factory=dict, description="Every logical resource (custom ones included)."
    )


class ClusterView(_View):
    """The Ray cluster sweeps run on, as its dashboard reports it (cached 10 s)."""

    ray_address: str | None = None
    reachable: bool = Field(
        description="Whether the cluster's node list could be read (right after a head "
        "starts it may be read but still empty)."
    )
    nodes: list[NodeView] = Field(default_factory=list)
    cpus: float = 0
    gpus: float = 0


class StatusList(_View):
    """The statuses a sweep and a trial can have, and the groups of a sweep's statuses
    the service acts on (`tuner/statuses.py`): clients such as the web page read them
    here instead of keeping a copy."""

    sweep: list[SweepStatus] = Field(..., description="A sweep's statuses, in lifecycle order.")
    terminal: list[SweepStatus] = Field(
        ..., description="A sweep's outcomes: it has ended (`finished_at` is set)."
    )
    stoppable: list[SweepStatus] = Field(..., description="Where `POST .../stop` applies.")
    resumable: list[SweepStatus] = Field(..., description="Where `POST .../resume` applies.")
    trial: list[TrialStatus] = Field(..., description="A trial's statuses (Ray Tune's).")

    @classmethod
    def current(cls) -> StatusList:
        """The vocabulary as tuner/statuses.py defines it."""
        return cls(
            sweep=list(SweepStatus),
            terminal=statuses.in_order(statuses.TERMINAL),
            stoppable=statuses.in_order(statuses.STOPPABLE),
            resumable=statuses.in_order(statuses.RESUMABLE),
            trial=list(TrialStatus),
        )


class Health(_View):
    """Liveness of the API, its store and its Ray cluster."""

    status: str
    version: str
    ray_address: str | None = None
    store: str


class Problem(_View):
    """An error: `detail` says what and, for bad input, lists {loc, msg, value}."""

    detail: Any


class Issue(_View):
    """One problem with a spec or a request: where (a dotted field path, or a
    parameter's name), what, and the value that was refused. Every 422 lists these;
    `tuner.spec.SpecError` carries them (as `SpecIssue`, this model)."""

    loc: str = Field(..., description="Dotted field path, e.g. search.space.lr.")
    msg: str = Field(..., description="What is wrong.")
    value: Any = Field(None, description="The offending value.")

    def __str__(self) -> str:
        shown = json.dumps(self.value, default=str)
        if len(shown) > 120:
            shown = shown[:117] + "..."
        return f"{self.loc}: {self.msg} (got {shown})"


class Problems(_View):
    """Bad input (HTTP 422 and 413): every problem, by field."""

    detail: list[Issue]


class ExampleSpec(_View):
    """An example spec shipped with tuner."""

    name: str
    spec: str = Field(..., description="Its YAML text.")
    needs: list[str] = Field(
        default_factory=list,
        description="What it needs beyond a plain `make run`, one line each: "
        "`TUNER_ALLOWED_MODULES=<module>` for the code it names by import path, an earlier "
        "sweep for a warm start; empty: it runs as it is.",
    )


class Plan(_View):
    """What a spec will cost before it runs (`tuner plan`, POST ?dry_run=true)."""

    trials: int = Field(..., description="Search trials: grid size x num_samples.")
    confirm_trials: int = Field(0, description="Confirmation trials: top_k x seeds.")
    per_trial: dict[str, float] = Field(
        ...,
        description="One trial's resources as Ray places them: CPU and GPU always (0 "
        "included), then any custom resources.",
    )
    bundles: list[dict[str, float]] = Field(..., description="Its placement group's bundles.")
    concurrent: int | None = Field(
        None, description="Trials that run at once on the target cluster (null: unknown)."
    )
    limited_by: str | None = Field(
        None,
        description="What caps `concurrent`: a resource (CPU, GPU, ...), "
        "max_concurrent_trials, or trials (all run at once).",
    )
    max_env_steps: int | None = Field(
        None, description="The most env steps the stop criteria allow, all trials together."
    )
    max_iterations: int | None = Field(
        None, description="The most training iterations, all trials together."
    )
    max_time_s: float | None = Field(
        None, description="The most wall time: time_budget_s, or time_total_s per wave."
    )
    fits: bool = Field(..., description="Whether one trial can be placed on the cluster.")
    problems: list[Issue] = Field(default_factory=list, description="Every problem, by field.")
    search_keys: list[str] = Field(default_factory=list, description="The keys searched.")
    warm_start: dict[str, Any] | None = Field(
        None,
        description="What a warm start reuses: the earlier sweep (`from`: its run name, "
        "`parent_run_id`), the configs that run `first`, how many finished trials are "
        "`told_to_optuna`, and what was dropped (`warnings`).",
    )
    scheduler: dict[str, Any] = Field(
        default_factory=dict,
        description="The scheduler's settings in force (tuner.spec.scheduler_in_force): "
        "type, time_attr (the unit it counts progress in), grace_period, max_t, "
        "reduction_factor and `rungs` (ASHA's milestones in time_attr), "
        "min_samples_required or perturbation_interval; `derived` lists those the spec "
        "left out.",
    )
    warnings: list[str] = Field(
        default_factory=list, description="What the spec will do that it may not mean."
    )
    base_settings: dict[str, Any] = Field(
        default_factory=dict,
        description="The env's base settings in force (tuner/search_spaces/env_settings.yaml: "
        "what rl-zoo3's tuner keeps from its yml files), each only where the spec sets none; "
        "`source` names the yml entry.",
    )


def with_mlflow_url(trial: TrialView, ui_url: str | None, experiment_id: str | None) -> TrialView:
    """The trial with the UI link of its MLflow run filled in."""
    trial.mlflow_url = run_url(ui_url, experiment_id, trial.mlflow_run_id)
    return trial


__all__ = [
    "BestTrial",
    "SearchBest",
    "ClusterView",
    "ConfirmedConfig",
    "ExampleSpec",
    "ExperimentList",
    "ExperimentView",
    "Health",
    "MetricPoint",
    "MetricSeries",
    "MlflowLinks",
    "Plan",
    "NodeView",
    "Issue",
    "Problem",
    "Problems",
    "StatusList",
    "SweepSummary",
    "TrialList",
    "TrialMetrics",
    "TrialView",
    "with_mlflow_url",
]
