"""ExperimentSpec: the one schema of a sweep.

The YAML file format, the REST request body, the OpenAPI/JSON schema and the
MLflow params all come from the models in this module. It imports neither Ray
nor FastAPI, so every process (CLI, API, driver) can load and check a spec.
"""

from __future__ import annotations

import math
import re
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from tuner import algorithms as registry
from tuner.mlflow_names import AGENT_RETURNS, LEARNERS_PREFIX, MODULE_RETURNS, RETURN_KEY
from tuner.search_spaces import Domain

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
    """Whether `env` is an Arcade Learning Environment id ("ALE/Breakout-v5")."""
    return env.startswith(ALE_PREFIX)


# A policy (RLModule) id: part of result keys, MLflow metric names and checkpoint paths.
MODULE_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
# An agent id as a policy_mapping key (what str() of the env's agent id gives), or "*".
AGENT_ID_RE = re.compile(r"^(\*|[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})$")
# RLlib's own module ids: the single-agent one, and the learners' key for all modules.
RESERVED_MODULE_IDS = ("default_policy", "__all_modules__")


# Stop keys of the spec -> flattened keys of an RLlib (new API stack) result.
STOP_RESULT_KEYS: dict[str, str] = {
    "episode_return_mean": RETURN_KEY,
    "timesteps_total": "num_env_steps_sampled_lifetime",
    "training_iteration": "training_iteration",
    "time_total_s": "time_total_s",
}


def _field_errors(
    model: BaseModel, errors: list[tuple[tuple[str | int, ...], str, Any]]
) -> ValidationError:
    """A ValidationError locating each (loc, msg, value) at its field: raised in a model
    validator, pydantic nests the locs under the model's own (multi_agent.policies.1)."""
    return ValidationError.from_exception_data(
        type(model).__name__,
        [
            InitErrorDetails(
                type=PydanticCustomError("value_error", "{msg}", {"msg": msg}),
                loc=loc,
                input=value,
            )
            for loc, msg, value in errors
        ],
    )


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", protected_namespaces=(), allow_inf_nan=False)


class SearchSpec(_Model):
    """How hyperparameters are sampled."""

    method: Literal["grid", "random", "optuna"] = Field(
        "random",
        description="grid: cartesian product of all `grid` values, repeated num_samples "
        "times; random: num_samples independent draws; optuna: num_samples trials "
        "suggested by Optuna's TPE sampler (seeded by the spec seed).",
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

    @model_validator(mode="after")
    def _grid_only_with_grid(self) -> SearchSpec:
        if self.num_samples is None:
            self.num_samples = 1 if self.method == "grid" else 4
        if self.method != "grid" and self.space:
            for key, dom in self.space.items():
                if dom.kind == "grid":
                    raise ValueError(
                        f"space.{key}: `grid` values need search.method 'grid' "
                        f"(method is {self.method!r}); use `choice` instead"
                    )
        return self


class SchedulerSpec(_Model):
    """Trial scheduler (early stopping / population based training)."""

    type: Literal["fifo", "asha", "median", "pbt", "pb2"] = Field(
        "fifo",
        description="fifo runs every trial to its stop criteria; asha and median "
        "stop poor trials early; pbt perturbs hyperparameters from the search space; pb2 "
        "(Population Based Bandits) picks the new values with a Gaussian-process bandit "
        "within the [low, high] bounds of the space's uniform, loguniform, randint and "
        "quniform domains (a choice or grid key is an error). Neither combines with "
        "search.method optuna.",
    )
    time_attr: Literal["training_iteration", "num_env_steps_sampled_lifetime", "time_total_s"] = (
        Field("training_iteration", description="Result key that measures a trial's progress.")
    )
    grace_period: int = Field(
        1, ge=1, description="asha/median: progress before a trial may be stopped."
    )
    max_t: int = Field(100, ge=1, description="asha: the most progress any trial gets.")
    reduction_factor: float = Field(3.0, gt=1, description="asha: halving rate.")
    perturbation_interval: int = Field(
        2, ge=1, description="pbt/pb2: progress (time_attr) between perturbations."
    )

    @model_validator(mode="after")
    def _grace_below_max(self) -> SchedulerSpec:
        if self.type == "asha" and self.grace_period > self.max_t:
            raise ValueError(f"grace_period ({self.grace_period}) must be <= max_t ({self.max_t})")
        return self

    def asha_rungs(self) -> int:
        """How many rungs ASHA makes of max_t, grace_period and reduction_factor (as Tune
        counts them); 0 for another scheduler. A service limits it (TUNER_MAX_ASHA_RUNGS)."""
        if self.type != "asha":
            return 0
        return 1 + math.floor(
            math.log(self.max_t / self.grace_period) / math.log(self.reduction_factor)
        )


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
        """Per-trial criteria as flattened RLlib result keys (Tune matches them with >=)."""
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
        "8, each env sampling 256+ steps of a batch, the same train batch, minibatches and "
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
    """Periodic evaluation with deterministic actions."""

    interval: int | None = Field(None, ge=1, description="Evaluate every N iterations.")
    duration: int = Field(10, ge=1, description="Episodes per evaluation.")


class MultiAgentSpec(_Model):
    """Multi-agent training: the policies (RLModules) and which agent each one drives."""

    policies: list[str] = Field(
        default_factory=lambda: ["shared"],
        min_length=1,
        max_length=64,
        description="Policy (RLModule) ids, each trained with its own weights and the "
        "spec's `model`; one id is a policy every agent shares. Letters, digits, '_', '.', "
        "'-' (at most 64).",
        json_schema_extra={"items": {"type": "string", "pattern": MODULE_ID_RE.pattern}},
    )
    policy_mapping: dict[str, str] = Field(
        default_factory=dict,
        max_length=1024,
        description="Agent id (as str() of the env's agent id) -> policy id; the key '*' "
        "names the policy of every agent not listed, otherwise they go to the first "
        "policy. Data only: RLlib's policy_mapping_fn is built from it.",
        json_schema_extra={"propertyNames": {"pattern": AGENT_ID_RE.pattern}},
    )

    @model_validator(mode="after")
    def _known_policies(self) -> MultiAgentSpec:
        errors: list[tuple[tuple[str | int, ...], str, Any]] = []

        def bad(loc: tuple[str | int, ...], value: str, msg: str) -> None:
            errors.append((loc, msg, value))

        seen: set[str] = set()
        for i, pid in enumerate(self.policies):
            if not MODULE_ID_RE.fullmatch(pid):
                bad(
                    ("policies", i),
                    pid,
                    "a policy id is letters, digits, '_', '.', '-' "
                    "(at most 64, starting with a letter or digit)",
                )
            elif pid in RESERVED_MODULE_IDS:
                bad(("policies", i), pid, "RLlib's own module id; name the policy otherwise")
            elif pid in seen:
                bad(("policies", i), pid, "listed twice")
            seen.add(pid)
        for agent, pid in self.policy_mapping.items():
            if not AGENT_ID_RE.fullmatch(agent):
                bad(
                    ("policy_mapping", agent),
                    agent,
                    "an agent id is letters, digits, "
                    "'_', '.', '-' (at most 128), or '*' for every agent not listed",
                )
            elif pid not in self.policies:
                bad(
                    ("policy_mapping", agent),
                    pid,
                    "not one of multi_agent.policies (" + ", ".join(self.policies) + ")",
                )
        if errors:
            raise _field_errors(self, errors)
        return self

    def policy_of(self, agent_id: object) -> str:
        """The policy that drives `agent_id`: its mapping, else '*', else the first."""
        return self.policy_mapping.get(
            str(agent_id), self.policy_mapping.get("*", self.policies[0])
        )


SCOPES: tuple[str, ...] = ("last", "last-5-avg", "last-10-avg", "avg", "all")


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
    checkpoint: CheckpointSpec = Field(default_factory=CheckpointSpec, description="Checkpoints.")
    evaluation: EvaluationSpec = Field(default_factory=EvaluationSpec, description="Evaluation.")
    seed: int = Field(
        0,
        ge=0,
        lt=2**31,
        description="Base seed; trial i gets seed + i (an optuna trial, whose id has no index: "
        "seed + a number derived from its id); recorded with the trial.",
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
            f"{v!r} is not an algorithm: use one of {', '.join(registry.names())}, or "
            "your own training loop as 'package.module:name'"
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
        if not METRIC_RE.fullmatch(v):
            raise ValueError(f"{v!r} is not a result key such as 'env_runners/episode_return_mean'")
        return v

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
        if self.metric.startswith("evaluation/") and not self.evaluation.interval:
            raise ValueError(f"metric {self.metric!r} needs evaluation.interval")
        self._check_multi_agent_metric()
        if self.custom_algorithm:
            rllib_only = [
                f
                for f in ("model", "callbacks", "module", "multi_agent", "wrappers")
                if getattr(self, f)
            ]
            if self.evaluation.interval:
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

    def _check_multi_agent_metric(self) -> None:
        """A per-agent or per-policy metric needs `multi_agent`, and a per-policy one
        (returns, `learners/<policy>/...`) a listed policy."""
        metric = self.metric.removeprefix("evaluation/")
        per_agent = metric.startswith((AGENT_RETURNS + "/", MODULE_RETURNS + "/"))
        if self.multi_agent is None:
            if per_agent:
                raise _field_errors(
                    self,
                    [(("metric",), "a per-agent metric needs a multi_agent section", self.metric)],
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
                        ("metric",),
                        f"{module!r} is not one of multi_agent.policies ({listed})",
                        self.metric,
                    )
                ],
            )

    @property
    def custom_algorithm(self) -> bool:
        """Whether `algorithm` is the user's own training loop ('package.module:name')."""
        return ":" in self.algorithm

    @property
    def base_algorithm(self) -> str:
        """The RLlib algorithm behind a preset (Rainbow_DQN -> DQN); a training loop's
        import path as it is."""
        if self.custom_algorithm:
            return self.algorithm
        return registry.base_algorithm(self.algorithm)

    def to_yaml(self) -> str:
        """The spec as YAML, exactly as it validates (defaults filled in)."""
        return yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False)
