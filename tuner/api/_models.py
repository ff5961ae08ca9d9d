"""Response models of every route: they are the OpenAPI docs."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from tuner.store import TrialRecord


class BestView(BaseModel):
    """The best trial of a sweep."""

    trial_id: str
    config: dict[str, Any] = Field(..., description="Its sampled values.")
    full_config: dict[str, Any] = Field(
        default_factory=dict,
        description="Fixed settings and sampled values: paste under a spec's `config`.",
    )
    seed: int | None = None
    metric_value: float
    checkpoint: str | None = None
    mlflow_run_id: str | None = None


class MlflowView(BaseModel):
    """Where the sweep is in MLflow."""

    experiment_id: str
    parent_run_id: str
    best_run_id: str | None = None
    model_version: str | None = None
    url: str | None = None


class ExperimentView(BaseModel):
    """One sweep."""

    id: str
    name: str
    status: str = Field(..., description="QUEUED RUNNING STOPPING SUCCEEDED STOPPED FAILED")
    algorithm: str
    env: str
    metric: str
    mode: str
    spec: dict[str, Any]
    warnings: list[str] = Field(default_factory=list)
    trial_counts: dict[str, int] = Field(default_factory=dict)
    best: BestView | None = None
    mlflow: MlflowView | None = None
    error: str | None = None
    attempts: int = 0
    job_id: str | None = None
    created_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None


class ExperimentList(BaseModel):
    """A page of sweeps, newest first."""

    items: list[ExperimentView]
    total: int
    limit: int
    offset: int


class TrialOut(TrialRecord):
    """One trial of a sweep (status PENDING RUNNING PAUSED TERMINATED ERROR; `config`
    holds its sampled values) with a link to its MLflow run."""

    mlflow_url: str | None = None


class TrialList(BaseModel):
    """Every trial of a sweep."""

    items: list[TrialOut]


class MetricPointOut(BaseModel):
    """One iteration of a trial."""

    iteration: int
    env_steps: int
    time_s: float
    values: dict[str, float]


class TrialMetrics(BaseModel):
    """A trial's metric history."""

    trial_id: str
    points: list[MetricPointOut]


class MetricSeries(BaseModel):
    """One metric of every trial: trial_id -> [[env_steps, value], ...]."""

    key: str
    series: dict[str, list[tuple[int, float]]]


class AlgorithmInfo(BaseModel):
    """An algorithm or preset users can name in `algorithm`."""

    name: str
    base_algorithm: str
    doc: str | None = None
    preset_config: dict[str, Any] = Field(default_factory=dict)
    default_space: dict[str, Any] = Field(default_factory=dict)
    warnings: list[str] = Field(default_factory=list)


class NodeView(BaseModel):
    """One alive Ray node and what it offers trials."""

    node_id: str
    node_ip: str | None = None
    is_head: bool = False
    cpus: float = 0
    gpus: float = 0
    resources: dict[str, float] = Field(
        default_factory=dict, description="Every logical resource (custom ones included)."
    )


class ClusterView(BaseModel):
    """The Ray cluster sweeps run on, as its dashboard reports it (cached 10 s)."""

    ray_address: str | None = None
    reachable: bool = Field(
        description="Whether the cluster's node list could be read (right after a head "
        "starts it may be read but still empty)."
    )
    nodes: list[NodeView] = Field(default_factory=list)
    cpus: float = 0
    gpus: float = 0


class Health(BaseModel):
    """Liveness of the API, its store and its Ray cluster."""

    status: str
    version: str
    ray_address: str | None = None
    store: str


class Problem(BaseModel):
    """An error: `detail` says what and, for bad specs, which field and value."""

    detail: Any
