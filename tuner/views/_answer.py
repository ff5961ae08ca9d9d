"""A sweep's answer: the best trial, the configs confirmed on fresh seeds, the Pareto
front of several objectives."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from tuner.mlflow_names import STAGE_CONFIRM, STAGE_SEARCH
from tuner.views._base import _View

# a BestTrial's scope where its score is the trial's final deterministic evaluation at its
# budget (evaluation.at_end), not the metric under the spec's scope
FINAL_SCOPE = "final-evaluation"
SCOPE_DESCRIPTION = (
    "How its score was taken: `final-evaluation` (the trial's final deterministic "
    "evaluation at its budget, the default with one), else the spec's scope of the metric."
)


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
    metric_value: float = Field(
        ...,
        description="Its score (see TrialView.score); with search.race, its config's mean "
        "over the seeds it ran.",
    )
    train_score: float | None = Field(None, description="Its training metric under scope.")
    scope: str = Field("last-5-avg", description=SCOPE_DESCRIPTION)
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
        "the metric under scope: see TrialView.score); with search.race, the mean of its "
        "config's seeds' scores (`race`).",
    )
    train_score: float | None = Field(
        None, description="Its search trial's training metric under scope."
    )
    scope: str = Field("last-5-avg", description=SCOPE_DESCRIPTION)
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
    race: ConfirmedConfig | None = Field(
        None,
        description="With search.race: its config's seeds in the search, their scores "
        "and mean (its metric_value: the mean of its seeds' scores); trial_id, seed and "
        "checkpoint are its median-score seed's.",
    )
    search_best: SearchBest | None = Field(
        None,
        description="With confirmation: the search's best trial by its score under scope "
        "(it can be another config: a single seed's winner is often luck).",
    )
