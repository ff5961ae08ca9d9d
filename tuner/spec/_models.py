"""ExperimentSpec: the one schema of a sweep.

The YAML file format, the REST request body, the OpenAPI/JSON schema and the
MLflow params all come from the models in this module. It imports neither Ray
nor FastAPI, so every process (CLI, API, driver) can load and check a spec.
"""

from __future__ import annotations

from typing import Any, Literal

import yaml
from pydantic import (
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from tuner import algorithms as registry
from tuner.mlflow_names import AGENT_RETURNS, LEARNERS_PREFIX, MODULE_RETURNS, RETURN_KEY
from tuner.search_spaces import BaseSettings, base_settings
from tuner.spec._base import SpecModel as _Model
from tuner.spec._base import field_errors as _field_errors
from tuner.spec._errors import did_you_mean
from tuner.spec._multi_agent import MultiAgentSpec

# Every algorithm and preset of the registry (tuner/algorithms/*.yaml).
from tuner.spec._scheduler_section import SchedulerSpec
from tuner.spec._sections import (
    ALGORITHMS,
    ENV_PATTERN,
    GYM_ID_RE,
    IMPORT_PATH_RE,
    METRIC_RE,
    NAME_RE,
    POPULATION_SCHEDULERS,
    PRESETS,
    CheckpointSpec,
    ConfirmSpec,
    EvaluationSpec,
    ObjectiveSpec,
    ResourcesSpec,
    SearchSpec,
    StopSpec,
    is_ale_id,
    metric_key,
)


class ExperimentSpec(_Model):
    """One sweep: an RLlib algorithm on an environment over a search space."""

    name: str = Field(
        ...,
        description="Sweep name; also the MLflow experiment name. "
        "Letters, digits, '_', '.', '-' (at most 64).",
        json_schema_extra={"pattern": NAME_RE.pattern},
    )
    algorithm: str = Field(
        ...,
        description=f"RLlib algorithm ({' '.join(ALGORITHMS)}), a named preset "
        f"({' '.join(PRESETS)}; GET /api/v1/algorithms lists them), or your own training "
        "loop 'package.module:name' (under the operator's allowed modules): a Tune "
        "Trainable subclass, or a function or generator taking the config that reports "
        "(tune.report) or yields a dict of metrics per iteration.",
        json_schema_extra={
            "anyOf": [
                {"enum": list(registry.names())},
                {"pattern": IMPORT_PATH_RE.pattern},
            ]
        },
    )
    env: str | None = Field(
        None,
        validate_default=True,
        description="A registered gymnasium id (no dots: RLlib would import a dotted name), "
        "or 'package.module:ClassOrFactory' (called with env_config) under a module the "
        "operator allows. Required for an RLlib "
        "algorithm; optional for your own training loop, which then gets it in its config "
        "as `env` (with `env_config`).",
        json_schema_extra={"pattern": ENV_PATTERN},
    )
    env_config: dict[str, Any] = Field(
        default_factory=dict,
        description="Passed to the env constructor / factory (gym.make kwargs for ids).",
    )
    wrappers: Literal["atari"] | None = Field(
        None,
        description="Preprocessing wrapped around the env, by name. `atari`: RLlib's Atari "
        "preprocessing (wrap_atari_for_new_api_stack: 84x84 grey frames in [-1, 1], max over "
        "4 skipped frames, 4 stacked, noop starts, a life lost ends the episode, FIRE on "
        "reset) on an ALE id such as 'ALE/Breakout-v5', created with frameskip 1, no sticky "
        "actions and the minimal action set (env_config overrides them); without "
        "model.conv_filters the model gets the Nature DQN CNN. Omitted: the env as is.",
    )
    normalize_observations: bool | None = Field(
        None,
        description="Normalize each observation element by its running mean and std "
        "(RLlib's MeanStdFilter env-to-module connector, clipped to +-10; rl-zoo3's "
        "`normalize: true`). The statistics are kept with every checkpoint, and `tuner "
        "evaluate` normalizes as the policy saw it. Not with your own "
        "config.env_to_module_connector. Omitted: the env's base setting "
        "(tuner/search_spaces/env_settings.yaml, from rl-zoo3's yml files), else off.",
    )
    config: dict[str, Any] = Field(
        default_factory=dict,
        description="Fixed RLlib settings under RLlib's own names; they override preset values.",
    )
    model: dict[str, Any] = Field(
        default_factory=dict,
        description="RLModule model_config (fcnet_hiddens, fcnet_activation, conv_filters, ...).",
    )
    callbacks: list[str] = Field(
        default_factory=list,
        description="RLlib callbacks classes by import path 'package.module:Name' (one, or a "
        "list; under the operator's allowed modules). What they log with RLlib's metrics "
        "logger (e.g. `metrics_logger.log_value('pole_angle_max', ...)` in on_episode_end) "
        "becomes a trial metric (`env_runners/pole_angle_max`): the sweep's `metric`, a "
        "`stop.metrics` criterion, plotted and logged to MLflow.",
    )
    module: str | None = Field(
        None,
        description="A custom RLModule class by import path 'package.module:Name' (under the "
        "operator's allowed modules); `model` is passed to it as its model_config.",
    )
    search: SearchSpec = Field(default_factory=SearchSpec, description="Search method and space.")
    scheduler: SchedulerSpec = Field(default_factory=SchedulerSpec, description="Trial scheduler.")
    metric: str = Field(
        RETURN_KEY,
        description="Flattened result key that ranks trials.",
        json_schema_extra={"pattern": METRIC_RE.pattern},
    )
    mode: Literal["max", "min"] = Field(
        "max", description="Whether the metric is maximised or minimised."
    )
    objectives: list[ObjectiveSpec] | None = Field(
        None,
        min_length=2,
        max_length=4,
        description="Several objectives instead of one metric/mode, e.g. [{metric: "
        "env_runners/episode_return_mean, mode: max}, {metric: time_total_s, mode: min}]. "
        "The sweep's answer is then the Pareto front (`pareto`): the trials no other trial "
        "beats on every objective, each objective's value taken under `scope`. With "
        "search.method optuna the search is Optuna's multi-objective TPE. Tune's scheduler, "
        "checkpoint ranking, `best` and the confirmation's order use the first objective; "
        "`confirm` re-runs the front's members. `metric`/`mode`, if also given, must be "
        "the first objective's.",
    )
    scope: Literal["last", "last-5-avg", "last-10-avg", "avg", "all"] = Field(
        "last-5-avg",
        description="How a trial's metric history is turned into the value trials are "
        "ranked by (Tune's names): its last value, the mean of its last 5 or 10, the mean "
        "of all, or `all`: its peak. A trial's `best_metric` is always its peak.",
    )
    confirm: ConfirmSpec | None = Field(
        None,
        description="After the search, re-run the top_k configs on `seeds` fresh seeds "
        "each (same stop criteria and resources) and rank them by mean score, with a 95 % "
        "bootstrap CI and the IQM. Omitted: no confirmation.",
    )
    multi_agent: MultiAgentSpec | None = Field(
        None,
        description="Multi-agent training, for an env that is an RLlib MultiAgentEnv "
        "(a PettingZoo env through RLlib's PettingZooEnv): the policies and which agent "
        "each drives. The metric may then be one agent's return "
        f"({AGENT_RETURNS}/<agent id>), one policy's ({MODULE_RETURNS}/<policy id>) or "
        "the sum over agents (env_runners/episode_return_mean, also what "
        "stop.episode_return_mean compares). Omitted: single-agent.",
    )
    stop: StopSpec = Field(default_factory=StopSpec, description="Stop criteria.")
    resources: ResourcesSpec = Field(
        default_factory=ResourcesSpec, description="Per-trial resources."
    )
    max_concurrent_trials: int | None = Field(
        None, ge=1, description="Trials running at once (default: as many as fit)."
    )
    reuse_actors: bool = Field(
        True,
        description="A trial's Ray actor runs the sweep's next trial on the same resources "
        "(Tune's reuse_actors): the RLlib algorithm is built again in place, as a fresh "
        "actor builds it, saving a process start and its imports (seconds per trial). "
        "false: a fresh process per trial (for callbacks that keep state in their module). "
        "A spec's own training loop always gets fresh actors, and so does APPO / IMPALA "
        "with a GPU Learner in the trial's process (num_learners: 0).",
    )
    max_failures: int = Field(
        2,
        ge=0,
        le=100,
        description="How many times a trial is restarted after a failure (its process, "
        "actor or node died, or it raised), from its last checkpoint (checkpoint.frequency; "
        "from the start without one): Tune's FailureConfig.max_failures. A trial ends in "
        "ERROR only after its retries; a resume of the sweep retries it once more.",
    )
    checkpoint: CheckpointSpec = Field(default_factory=CheckpointSpec, description="Checkpoints.")
    evaluation: EvaluationSpec = Field(default_factory=EvaluationSpec, description="Evaluation.")
    seed: int = Field(
        0,
        ge=0,
        lt=2**31,
        description="Base seed; trial i gets seed + i (an optuna trial: i is its place in the "
        "order the searcher suggests trials; with search.race, the seed's place within its "
        "config), so the same spec trains the same seeds on every run; recorded with the "
        "trial.",
    )

    @field_validator("name")
    @classmethod
    def _safe_name(cls, v: str) -> str:
        if not NAME_RE.fullmatch(v):
            raise ValueError(
                f"{v!r} is not a valid name: use letters, digits, '_', '.', '-' "
                "(at most 64, starting with a letter or digit)"
            )
        return v

    @field_validator("algorithm")
    @classmethod
    def _known_algorithm(cls, v: str) -> str:
        if v in registry.names() or IMPORT_PATH_RE.fullmatch(v):
            return v
        raise ValueError(
            f"{v!r} is not an algorithm (one of {', '.join(registry.names())}, or your own "
            f"training loop as 'package.module:name'){did_you_mean(v, registry.names())}"
        )

    @field_validator("env")
    @classmethod
    def _safe_env(cls, v: str | None, info: ValidationInfo) -> str | None:
        if v is None:
            algorithm = info.data.get("algorithm")
            if algorithm is not None and ":" not in algorithm:
                raise ValueError(f"an RLlib algorithm ({algorithm}) needs an env")
            return v
        if ":" in v:
            if not IMPORT_PATH_RE.fullmatch(v):
                raise ValueError(f"{v!r} is not 'package.module:Name'")
        elif "." in v:
            module, _, name = v.rpartition(".")
            raise ValueError(
                f"{v!r}: RLlib imports a dotted env name as 'module.Class' and calls it; a "
                "gymnasium id has no dots, and your own env is an import path "
                f"('{module}:{name}') under a module the operator allows "
                "(TUNER_ALLOWED_MODULES, `tuner run --allow-module`)"
            )
        elif not GYM_ID_RE.fullmatch(v):
            raise ValueError(f"{v!r} is not a gymnasium id such as 'CartPole-v1'")
        return v

    @field_validator("callbacks", mode="before")
    @classmethod
    def _one_or_list(cls, v: Any) -> Any:
        return [v] if isinstance(v, str) else v

    @field_validator("callbacks")
    @classmethod
    def _callback_paths(cls, v: list[str]) -> list[str]:
        for i, path in enumerate(v):
            if not IMPORT_PATH_RE.fullmatch(path):
                raise ValueError(f"callbacks.{i}: {path!r} is not 'package.module:Name'")
        return v

    @field_validator("module")
    @classmethod
    def _module_path(cls, v: str | None) -> str | None:
        if v is not None and not IMPORT_PATH_RE.fullmatch(v):
            raise ValueError(f"{v!r} is not 'package.module:Name'")
        return v

    @field_validator("wrappers")
    @classmethod
    def _wrappers_fit_env(cls, v: str | None, info: ValidationInfo) -> str | None:
        env = info.data.get("env")
        if v == "atari" and isinstance(env, str) and not is_ale_id(env):
            raise ValueError(
                f"wrappers 'atari' preprocesses Atari frames: it needs an ALE id such as "
                f"'ALE/Breakout-v5' as env, not {env!r}"
            )
        return v

    @field_validator("metric")
    @classmethod
    def _metric_key(cls, v: str) -> str:
        return metric_key(v)

    @field_validator("scheduler")
    @classmethod
    def _population_needs_tune_sampling(
        cls, v: SchedulerSpec, info: ValidationInfo
    ) -> SchedulerSpec:
        search = info.data.get("search")
        if v.type in POPULATION_SCHEDULERS and search is not None and search.method == "optuna":
            raise ValueError(
                f"scheduler.type {v.type!r} cannot be combined with search.method 'optuna' "
                "(the scheduler picks the new values itself); use method random or grid"
            )
        return v

    @model_validator(mode="after")
    def _cross_checks(self) -> ExperimentSpec:
        if self.evaluation.at_end is None:
            # the policy as it is deployed judges the trials that ran their budget (set
            # before the objectives are checked: an evaluation objective relies on it)
            budget = self.stop.timesteps_total or self.stop.training_iteration
            self.evaluation.at_end = bool(budget) and not self.custom_algorithm
        self._take_first_objective()
        self._check_race()
        if self.metric.startswith("evaluation/") and not self.evaluation.enabled:
            raise ValueError(f"metric {self.metric!r} needs evaluation.interval or at_end")
        if self.evaluation.at_end and not (
            self.stop.timesteps_total or self.stop.training_iteration
        ):
            raise _field_errors(
                self,
                [
                    (
                        ("evaluation", "at_end"),
                        "needs a budget to end at: stop.timesteps_total or stop.training_iteration",
                        True,
                    )
                ],
            )
        self._check_multi_agent_metric()
        if self.custom_algorithm:
            rllib_only = [
                f
                for f in ("model", "callbacks", "module", "multi_agent", "wrappers")
                if getattr(self, f)
            ]
            if self.evaluation.enabled:
                rllib_only.append("evaluation")
            if rllib_only:
                raise ValueError(
                    f"{', '.join(rllib_only)}: RLlib settings, not for your own training loop "
                    f"({self.algorithm}); put what it needs in `config`"
                )
            if "metric" not in self.model_fields_set:
                raise ValueError(
                    f"metric: name the key your training loop ({self.algorithm}) reports, "
                    "e.g. metric: episode_return_mean"
                )
        return self

    def _check_race(self) -> None:
        """search.race ranks one metric's mean over seeds, each config as sampled."""
        if self.search.race is None:
            return
        if self.objectives:
            raise ValueError(
                "search.race: a Pareto front of several objectives is not raced; "
                "give one metric, or drop search.race"
            )
        if self.scheduler.type in POPULATION_SCHEDULERS:
            raise ValueError(
                f"search.race: scheduler.type {self.scheduler.type!r} changes a trial's "
                "values while it runs, so its seeds would not share one config; use fifo, "
                "asha or median"
            )
        if self.scheduler.type == "hyperband":
            raise ValueError(
                "search.race: scheduler.type 'hyperband' deals a config's seeds to "
                "brackets that judge them at different rungs; use fifo, asha or median"
            )

    def _take_first_objective(self) -> None:
        """With `objectives`: metric/mode become the first objective's (Tune ranks by
        it); a metric or mode set apart from them must be the same. Every evaluation
        objective needs evaluation, and no metric is named twice."""
        if not self.objectives:
            return
        first = self.objectives[0]
        for field, value in (("metric", first.metric), ("mode", first.mode)):
            if field in self.model_fields_set and getattr(self, field) != value:
                raise _field_errors(
                    self,
                    [
                        (
                            (field,),
                            f"give either metric/mode or objectives: {field} "
                            f"{getattr(self, field)!r} is not the first objective's {value!r}",
                            getattr(self, field),
                        )
                    ],
                )
        errors: list[tuple[tuple[str | int, ...], str, Any]] = []
        seen: set[str] = set()
        for i, objective in enumerate(self.objectives):
            if objective.metric in seen:
                errors.append((("objectives", i, "metric"), "named twice", objective.metric))
            seen.add(objective.metric)
            if objective.metric.startswith("evaluation/") and not self.evaluation.enabled:
                errors.append(
                    (
                        ("objectives", i, "metric"),
                        "an evaluation metric needs evaluation.interval or at_end",
                        objective.metric,
                    )
                )
        if errors:
            raise _field_errors(self, errors)
        self.metric, self.mode = first.metric, first.mode

    @property
    def objective_list(self) -> list[ObjectiveSpec]:
        """The sweep's objectives: `objectives`, else the one metric/mode."""
        return self.objectives or [ObjectiveSpec(metric=self.metric, mode=self.mode)]

    def _check_multi_agent_metric(self) -> None:
        """A per-agent or per-policy metric (each objective's) needs `multi_agent`, and a
        per-policy one (returns, `learners/<policy>/...`) a listed policy."""
        if not self.objectives:
            self._check_agent_metric(("metric",), self.metric)
        for i, objective in enumerate(self.objectives or []):
            self._check_agent_metric(("objectives", i, "metric"), objective.metric)

    def _check_agent_metric(self, loc: tuple[str | int, ...], full: str) -> None:
        metric = full.removeprefix("evaluation/")
        per_agent = metric.startswith((AGENT_RETURNS + "/", MODULE_RETURNS + "/"))
        if self.multi_agent is None:
            if per_agent:
                raise _field_errors(
                    self,
                    [(loc, "a per-agent metric needs a multi_agent section", full)],
                )
            return
        module = None
        if metric.startswith(MODULE_RETURNS + "/"):
            module = metric[len(MODULE_RETURNS) + 1 :]
        elif metric.startswith(LEARNERS_PREFIX):
            module = metric.split("/")[1]
            if module == "__all_modules__":
                return
        if module is not None and module not in self.multi_agent.policies:
            listed = ", ".join(self.multi_agent.policies)
            raise _field_errors(
                self,
                [
                    (
                        loc,
                        f"{module!r} is not one of multi_agent.policies ({listed})",
                        full,
                    )
                ],
            )

    @property
    def custom_algorithm(self) -> bool:
        """Whether `algorithm` is the user's own training loop ('package.module:name')."""
        return ":" in self.algorithm

    @property
    def base(self) -> BaseSettings:
        """The env's base settings for the algorithm (env_settings.yaml).

        None set for a training loop of the user's own.
        """
        if self.custom_algorithm:
            return BaseSettings()
        return base_settings(self.env, self.base_algorithm)

    @property
    def observations_normalized(self) -> bool:
        """Whether the trials normalize observations.

        `normalize_observations` as set, else the env's base setting where the spec sets no
        connector of its own.
        """
        if self.normalize_observations is not None:
            return self.normalize_observations
        if self.custom_algorithm or "env_to_module_connector" in self.config:
            return False
        if "env_to_module_connector" in (self.search.space or {}):
            return False
        return bool(self.base.normalize_observations)

    @property
    def base_algorithm(self) -> str:
        """The RLlib algorithm behind a preset (Rainbow_DQN -> DQN).

        A training loop's import path as it is.
        """
        if self.custom_algorithm:
            return self.algorithm
        return registry.base_algorithm(self.algorithm)

    def to_yaml(self) -> str:
        """The spec as YAML, exactly as it validates (defaults filled in).

        Returns:
            The YAML text.
        """
        return yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False)
