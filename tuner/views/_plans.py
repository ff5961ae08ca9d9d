"""Before a sweep runs: what a spec will cost, and the example specs shipped with tuner."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from tuner.views._base import _View
from tuner.views._problems import Issue


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
        "reduction_factor and `rungs` (ASHA's milestones in time_attr; hyperband: "
        "`brackets`, each bracket's `rungs` and how many `trials` it gets), "
        "min_samples_required or perturbation_interval; `judged_on`: the metric it judges "
        "trials on where not the spec's (the training return for an evaluation metric "
        "reported only at the end); `derived` lists those the spec left out.",
    )
    sampler: dict[str, Any] | None = Field(
        None,
        description="search.method optuna: Optuna's sampler in force "
        "(tuner.spec.resolved_sampler): `type` (tpe or gp) and `n_startup_trials` (the "
        "trials drawn at random before the model picks values); `derived` lists those "
        "the spec left out. None for grid and random search.",
    )
    race: dict[str, Any] | None = Field(
        None,
        description="search.race: `seeds` (the seeds each config may run on, the same "
        "for every config) and `rule` (when a config runs its next seed); None without a "
        "race.",
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
