"""The outcome of a sweep: every trial and the best one, in the public view shape."""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, Field

from tuner.trials._algorithms import trial_index, trial_seed
from tuner.trials._stoppers import lookup


class TrialView(BaseModel):
    """One trial as users see it (CLI JSON, REST API, web page)."""

    trial_id: str
    status: str = Field(..., description="PENDING RUNNING TERMINATED ERROR")
    config: dict[str, Any] = Field(default_factory=dict, description="Sampled values.")
    seed: int | None = None
    iterations: int = 0
    env_steps: int = 0
    metric: float | None = Field(None, description="Metric at the last iteration.")
    best_metric: float | None = Field(None, description="Best metric over all iterations.")
    error: str | None = None
    node_id: str | None = None
    node_ip: str | None = None
    device: str | None = None
    checkpoint: str | None = None
    mlflow_run_id: str | None = None


class BestTrial(BaseModel):
    """The best trial of a sweep, ranked by its best metric value."""

    trial_id: str
    config: dict[str, Any] = Field(..., description="Its sampled values.")
    full_config: dict[str, Any] = Field(
        default_factory=dict,
        description="The fixed settings and sampled values together: "
        "paste under `config` to rerun it.",
    )
    seed: int | None = None
    metric_value: float
    checkpoint: str | None = None


class TrackingConfig(BaseModel):
    """Where a sweep is tracked in MLflow."""

    tracking_uri: str
    experiment_name: str | None = Field(None, description="Default: the spec name.")
    artifact_location: str | None = Field(
        None, description="Artifact root for experiments we create (embedded default)."
    )
    ui_url: str | None = Field(None, description="MLflow UI base URL for links.")

    def run_url(self, experiment_id: str, run_id: str) -> str | None:
        """Link to a run in the MLflow UI."""
        if not self.ui_url:
            return None
        return f"{self.ui_url.rstrip('/')}/#/experiments/{experiment_id}/runs/{run_id}"


class MlflowLinks(BaseModel):
    """Where a sweep landed in MLflow."""

    experiment_id: str
    parent_run_id: str
    best_run_id: str | None = None
    model_version: str | None = Field(
        None, description="models:/<name>/<version> of the best checkpoint."
    )
    url: str | None = None


class SweepSummary(BaseModel):
    """`tuner run --output json`: the best trial and every trial."""

    name: str
    status: str = Field(
        ...,
        description="SUCCEEDED (some trial finished), STOPPED (interrupted, resumable) "
        "or FAILED (no trial finished).",
    )
    metric: str
    mode: str
    best: BestTrial | None = None
    trials: list[TrialView] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    path: str | None = Field(None, description="Tune experiment directory.")
    mlflow: MlflowLinks | None = None


def _finite(value: Any) -> float | None:
    if isinstance(value, int | float) and math.isfinite(value):
        return float(value)
    return None


def better(a: float, b: float | None, mode: str) -> bool:
    """Whether metric value a beats b under mode ('max' or 'min')."""
    return b is None or (a > b if mode == "max" else a < b)


def trial_view_from_result(
    trial_id: str,
    status: str,
    result: dict[str, Any],
    *,
    sampled: dict[str, Any],
    metric: str,
    base_seed: int,
    best_metric: float | None = None,
    error: str | None = None,
) -> TrialView:
    """A TrialView from the last (nested or flat) Tune result of a trial."""
    info = result.get("tuner") or {
        k: lookup(result, f"tuner/{k}") for k in ("seed", "node_id", "device")
    }
    seed = info.get("seed")
    return TrialView(
        trial_id=trial_id,
        status=status,
        config=sampled,
        seed=seed if seed is not None else trial_seed(base_seed, trial_index(trial_id)),
        iterations=int(result.get("training_iteration") or 0),
        env_steps=int(result.get("num_env_steps_sampled_lifetime") or 0),
        metric=_finite(lookup(result, metric)),
        best_metric=best_metric,
        error=error,
        node_id=info.get("node_id"),
        node_ip=result.get("node_ip"),
        device=info.get("device"),
    )
