"""A trial and its metric history: the trial table, a trial's points, a metric's curves."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import Field, WithJsonSchema

from tuner.mlflow_names import STAGE_SEARCH, run_url
from tuner.statuses import TrialStatus
from tuner.views._base import _View


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
        description="The training metric (stochastic actions) under the spec's scope; "
        "for an `evaluation/...` metric, the same key of the training episodes.",
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
    cpu: str | None = Field(
        None,
        description="The CPU and torch's kernel level it trained on (with its remote "
        "Learners' where they run on another): a seed trains the same numbers only where "
        "this matches.",
    )
    checkpoint: str | None = None
    mlflow_run_id: str | None = None
    mlflow_url: str | None = Field(None, description="Its MLflow run in the UI (service only).")
    experiment_id: str | None = Field(None, description="Its sweep (service only).")
    updated_at: datetime | None = Field(None, description="Last change (service only).")


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


def with_mlflow_url(trial: TrialView, ui_url: str | None, experiment_id: str | None) -> TrialView:
    """The trial with the UI link of its MLflow run filled in.

    Args:
        trial: The trial's view; its `mlflow_url` is set in place.
        ui_url: The MLflow UI's address (None: no link).
        experiment_id: The MLflow experiment its run is in.

    Returns:
        The same trial.
    """
    trial.mlflow_url = run_url(ui_url, experiment_id, trial.mlflow_run_id)
    return trial
