"""The sections of a sweep's spec (search, scheduler, stop, resources, checkpoint,
evaluation, confirm) and the patterns and names they check against. multi_agent is in
_multi_agent.py; ExperimentSpec (_models.py) puts them together."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from tuner import algorithms as registry
from tuner.mlflow_names import RETURN_KEY
from tuner.search_spaces import Domain
from tuner.spec._base import SpecModel as _Model

# Every algorithm and preset of the registry (tuner/algorithms/*.yaml).
ALGORITHMS: tuple[str, ...] = registry.base_algorithms()
PRESETS: tuple[str, ...] = registry.presets()

# Schedulers that perturb hyperparameters of running trials (Tune refuses a searcher
# such as Optuna with them).
POPULATION_SCHEDULERS: tuple[str, ...] = ("pbt", "pb2")
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
# A gymnasium id ("CartPole-v1", "ALE/Pong-v5") or "package.module:ClassOrFactory". No
# dots in an id: RLlib imports a dotted env name as "module.Class" and calls it
# (algorithms/algorithm.py:3556-3566), so "subprocess.Popen" would be code.
GYM_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_/-]{0,127}$")
IMPORT_PATH_RE = re.compile(
    r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*$"
)
# Both kinds of env in one JSON-schema pattern (the OpenAPI schema says what is accepted).
ENV_PATTERN = (
    r"^(?:[A-Za-z0-9][A-Za-z0-9_/-]{0,127}"
    r"|[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*)$"
)
METRIC_RE = re.compile(r"^[A-Za-z0-9_/.-]{1,200}$")
# The Arcade Learning Environment's gymnasium namespace (ale-py); `wrappers: atari` needs it.
ALE_PREFIX = "ALE/"


def is_ale_id(env: str) -> bool:
    """Whether `env` is an Arcade Learning Environment id ("ALE/Breakout-v5").

    Args:
        env: The spec's env.

    Returns:
        True for an ALE id.
    """
    return env.startswith(ALE_PREFIX)


# Stop keys of the spec -> flattened keys of an RLlib (new API stack) result.
STOP_RESULT_KEYS: dict[str, str] = {
    "episode_return_mean": RETURN_KEY,
    "timesteps_total": "num_env_steps_sampled_lifetime",
    "training_iteration": "training_iteration",
    "time_total_s": "time_total_s",
}


class WarmStartSpec(_Model):
    """Start from an earlier sweep: its finished trials seed the search."""

    # `from` is a Python keyword: the field is from_, written and shown as `from`
    model_config = ConfigDict(
        extra="forbid", allow_inf_nan=False, validate_by_name=True, serialize_by_alias=True
    )

    from_: str = Field(
        ...,
        alias="from",
        min_length=1,
        max_length=256,
        description="The earlier sweep: its id (the service), its run name (`tuner run`), "
        "or its name (the MLflow experiment: its latest finished sweep). Found in MLflow.",
    )
    top_k: int = Field(
        3,
        ge=0,
        le=100,
        description="Its best configs (by score) that run first, as ordinary trials, before "
        "anything is sampled. With optuna, every finished trial of the same algorithm and "
        "metric is also told to the sampler with its score.",
    )


class SamplerSpec(_Model):
    """Optuna's sampler (search.method: optuna): its model and its random start."""

    type: Literal["tpe", "gp"] = Field(
        "tpe",
        description="tpe: Optuna's Tree-structured Parzen Estimator (multivariate, with "
        "a constant liar for trials running at once); gp: Optuna's Gaussian-process "
        "sampler (GPSampler).",
    )
    n_startup_trials: int | None = Field(
        None,
        ge=1,
        le=10000,
        description="Trials drawn at random before the model picks values. Default: "
        "Optuna's own 10, at most num_samples (tuner/spec/scheduler_defaults.yaml `optuna`).",
    )


class RaceSpec(_Model):
    """Each config raced over several seeds during the search.

    A config that wins by a lucky seed loses its place before the confirmation."""

    seeds: int = Field(
        ...,
        ge=2,
        le=10,
        description="The most seeds a config is trained on (its instances: seed, seed+1, "
        "...; every config's first instance has the same seed). A config runs its next "
        "seed only while its mean score is at least the best fully raced config's mean "
        "(before any is, one trailing the best mean over the same seeds waits for it); "
        "the search ranks configs by their mean over the most seeds any config ran. Every "
        "instance is one of num_samples' trials.",
    )


class SearchSpec(_Model):
    """How hyperparameters are sampled."""

    method: Literal["grid", "random", "optuna"] = Field(
        "random",
        description="grid: cartesian product of all `grid` values, repeated num_samples "
        "times; random: num_samples independent draws; optuna: num_samples trials "
        "suggested by Optuna's sampler (search.sampler: TPE by default; seeded by the spec "
        "seed).",
    )
    num_samples: int = Field(
        None,
        ge=1,
        le=10000,
        description="Number of trials (random/optuna; default 4) or repetitions of the "
        "grid (grid; default 1).",
    )
    space: dict[str, Domain] | None = Field(
        None,
        description="Hyperparameters to search, keyed by RLlib config name (`lr`, `gamma`, "
        "`lambda`, ...), `model.<key>` for the RLModule model_config or `env_config.<key>` "
        "for an env constructor argument. Omitted: the "
        "algorithm's default search space (tuner/search_spaces/defaults.yaml).",
    )
    sampler: SamplerSpec | None = Field(
        None,
        description="optuna only: the sampler and its random start. Default: TPE, "
        "Optuna's own random start (tuner/spec/scheduler_defaults.yaml `optuna`).",
    )
    warm_start: WarmStartSpec | None = Field(
        None,
        description="Reuse an earlier sweep of the same algorithm: its best `top_k` configs "
        "run first, and Optuna learns from all its finished trials. Keys are mapped by name; "
        "those outside this space, or values outside its ranges, are dropped, with a "
        "warning.",
    )

    race: RaceSpec | None = Field(
        None,
        description="optuna and random: race each config over several seeds (`seeds`); "
        "Optuna is told a config's mean over the seeds it ran (random draws through "
        "Optuna's RandomSampler). Default: none, one seed a config.",
    )

    @model_validator(mode="after")
    def _grid_only_with_grid(self) -> SearchSpec:
        if self.num_samples is None:
            self.num_samples = 1 if self.method == "grid" else 4
        if self.race is not None and self.method == "grid":
            raise ValueError(
                "race: a grid runs every config; repeat it on seeds with num_samples "
                "(race needs search.method 'optuna' or 'random')"
            )
        if self.race is not None and self.num_samples < self.race.seeds:
            raise ValueError(
                f"race.seeds: {self.race.seeds} seeds need num_samples >= {self.race.seeds} "
                f"(num_samples is {self.num_samples})"
            )
        if self.sampler is not None and self.method != "optuna":
            raise ValueError(
                f"sampler: a sampler needs search.method 'optuna' (method is {self.method!r})"
            )
        if self.method != "grid" and self.space:
            for key, dom in self.space.items():
                if dom.kind == "grid":
                    raise ValueError(
                        f"space.{key}: `grid` values need search.method 'grid' "
                        f"(method is {self.method!r}); use `choice` instead"
                    )
        return self


class StopSpec(_Model):
    """When a trial (or the whole sweep) ends. A trial stops at the first criterion met."""

    episode_return_mean: float | None = Field(
        None,
        description="Stop a trial once env_runners/episode_return_mean >= this "
        "(multi-agent: the return summed over agents).",
    )
    timesteps_total: int | None = Field(
        None, ge=1, description="Stop a trial after this many env steps sampled."
    )
    training_iteration: int | None = Field(
        None, ge=1, description="Stop a trial after this many training iterations."
    )
    time_total_s: float | None = Field(
        None, gt=0, description="Stop a trial after this much training wall time (s)."
    )
    time_budget_s: float | None = Field(
        None, gt=0, description="Wall-time budget of the whole sweep (s)."
    )
    metrics: dict[str, float] = Field(
        default_factory=dict,
        description="Stop a trial once any of these flattened result keys (e.g. a metric "
        "your callbacks log, `env_runners/pole_angle_max`) is >= its value.",
    )
    stop_on_target: bool = Field(
        False,
        description="End the whole sweep as soon as any trial reaches episode_return_mean.",
    )

    @model_validator(mode="after")
    def _target_needs_threshold(self) -> StopSpec:
        if self.stop_on_target and self.episode_return_mean is None:
            raise ValueError("stop_on_target needs stop.episode_return_mean")
        return self

    def trial_criteria(self) -> dict[str, float]:
        """Per-trial criteria as flattened RLlib result keys (Tune matches them with >=).

        Returns:
            Each result key's threshold.
        """
        out: dict[str, float] = {}
        for key, result_key in STOP_RESULT_KEYS.items():
            value = getattr(self, key)
            if value is not None:
                out[result_key] = value
        out.update(self.metrics)
        return out

    @field_validator("metrics")
    @classmethod
    def _result_keys(cls, v: dict[str, float]) -> dict[str, float]:
        for key in v:
            if not METRIC_RE.fullmatch(key):
                raise ValueError(f"{key!r} is not a result key such as 'env_runners/my_metric'")
        return v


class ResourcesSpec(_Model):
    """Resources of one trial; each trial gets its own placement group built from them."""

    num_env_runners: int = Field(
        0,
        ge=0,
        le=1024,
        description="Remote env runner actors (0: sample in the trial's "
        "main process, the cheapest on a laptop).",
    )
    num_envs_per_env_runner: int | None = Field(
        None,
        ge=1,
        le=1024,
        description="Vectorized envs per env runner. Unset: 1, or the algorithm's "
        "performance default where the spec leaves the trials' sampling to it (PPO: up to "
        "8, each env sampling 32+ steps of a batch, the same train batch, minibatches and "
        "epochs; DQN on the flat replay path: 8, the update ratio held); evaluation keeps 1.",
    )
    num_cpus_per_env_runner: float = Field(1, gt=0, description="CPUs per env runner.")
    num_gpus_per_env_runner: float = Field(
        0, ge=0, description="GPUs per env runner (fractions share a GPU)."
    )
    num_learners: int = Field(
        0,
        ge=0,
        le=1024,
        description="Remote learner actors (0: learn in the trial's main process).",
    )
    num_gpus_per_learner: float = Field(
        0,
        ge=0,
        description="GPUs per learner; a fraction such as 0.25 lets four trials share one GPU.",
    )
    num_cpus_for_main_process: float = Field(
        1, gt=0, description="CPUs of the trial's main (algorithm) process."
    )
    placement_strategy: Literal["PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"] = Field(
        "PACK", description="Ray placement-group strategy of each trial's bundles."
    )

    @field_validator("num_gpus_per_learner", "num_gpus_per_env_runner")
    @classmethod
    def _fraction_or_whole(cls, v: float) -> float:
        if v > 1 and v != int(v):
            raise ValueError(f"must be a fraction <= 1 or a whole number, got {v}")
        return v


class CheckpointSpec(_Model):
    """Checkpointing of trials."""

    frequency: int = Field(
        0, ge=0, description="Checkpoint every N iterations (0: never periodically)."
    )
    at_end: bool = Field(True, description="Checkpoint when a trial ends.")
    num_to_keep: int | None = Field(
        2, ge=1, description="Checkpoints kept per trial (best by score_attribute); null keeps all."
    )
    score_attribute: str | None = Field(
        None, description="Result key that ranks checkpoints; defaults to the spec metric."
    )


class EvaluationSpec(_Model):
    """Evaluation with deterministic actions (the policy as it is used).

    Reported under `evaluation/...` (e.g. `evaluation/env_runners/episode_return_mean`).
    """

    interval: int | None = Field(None, ge=1, description="Evaluate every N iterations.")
    duration: int = Field(10, ge=1, description="Episodes per evaluation.")
    at_end: bool | None = Field(
        None,
        description="Evaluate each trial once more at the end of its budget "
        "(stop.timesteps_total or stop.training_iteration), inside the trial, in parallel "
        "with the others: its final policy, deterministic, over `duration` episodes, "
        "episode i from the trial's seed + i (as `tuner evaluate --seed` plays them). "
        "Default: on wherever the stop criteria give a budget (not for a spec's own "
        "training loop). Trials that ran their budget are then ranked by it (`score`), "
        "their training return under scope kept as `train_score`; a confirmation seed "
        "is scored by it.",
    )

    @property
    def enabled(self) -> bool:
        """Whether trials evaluate at all (periodically or at the end)."""
        return bool(self.interval or self.at_end)


SCOPES: tuple[str, ...] = ("last", "last-5-avg", "last-10-avg", "avg", "all")


class ObjectiveSpec(_Model):
    """One objective of a sweep with several (`objectives`)."""

    metric: str = Field(
        ...,
        description="Flattened result key a trial reports (any, e.g. time_total_s).",
        json_schema_extra={"pattern": METRIC_RE.pattern},
    )
    mode: Literal["max", "min"] = Field(..., description="Maximised or minimised.")

    @field_validator("metric")
    @classmethod
    def _metric_key(cls, v: str) -> str:
        return metric_key(v)


def metric_key(v: str) -> str:
    """A metric as a spec names it (`metric`, an objective's): a flattened result key."""
    if not METRIC_RE.fullmatch(v):
        raise ValueError(f"{v!r} is not a result key such as 'env_runners/episode_return_mean'")
    return v


class ConfirmSpec(_Model):
    """Re-run the search's best configs on fresh seeds before naming a winner."""

    top_k: int = Field(
        3, ge=1, le=20, description="How many of the search's best configs are re-run."
    )
    seeds: int = Field(
        5,
        ge=2,
        le=50,
        description="Fresh seeds per config (disjoint from every search trial's seed); "
        "the configs are ranked by their mean score over these seeds.",
    )
