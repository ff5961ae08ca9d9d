"""What a spec gets wrong, or risks, that text and registries can tell.

Each function returns the issues it finds (tuner.spec.SpecIssue), or the warnings (a
scheduler that stops trials short of their budget, a Pareto front that misleads), and
builds or imports nothing a spec names (it reads RLlib's default configs and gymnasium's
registry). The checks (_checks.py) and the pipeline's stage for data that is no spec
(`unparsed_spec_issues`) call them."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from tuner import algorithms as registry
from tuner.mlflow_names import ITERATION_KEY, STEP_KEY
from tuner.results import EVALUATION_PREFIX
from tuner.rllib import (
    MODEL_PREFIX,
    Q_ENCODER,
    Q_ENCODERS,
    default_config,
    rllib_keys,
)
from tuner.search_spaces import PB2_KINDS, Domain
from tuner.spec import (
    GYM_ID_RE,
    POPULATION_SCHEDULERS,
    ExperimentSpec,
    SchedulerSpec,
    SpecIssue,
    budget_in,
    check_code_refs,
    check_space_code_refs,
    did_you_mean,
    is_ale_id,
    module_allowed,
    number_setting_issues,
    resolved_scheduler,
    scheduler_metric,
)

# Spec sections own these; setting them under `config` would fight the spec.
OWNED_BY_SPEC = {
    "env": "env",
    "env_config": "env_config",
    "seed": "seed",
    "num_env_runners": "resources.num_env_runners",
    "num_learners": "resources.num_learners",
    "num_gpus_per_learner": "resources.num_gpus_per_learner",
    "num_envs_per_env_runner": "resources.num_envs_per_env_runner",
    "num_cpus_per_env_runner": "resources.num_cpus_per_env_runner",
    "num_gpus_per_env_runner": "resources.num_gpus_per_env_runner",
    "num_cpus_for_main_process": "resources.num_cpus_for_main_process",
    "placement_strategy": "resources.placement_strategy",
    "evaluation_interval": "evaluation.interval",
    "evaluation_duration": "evaluation.duration",
    "evaluation_duration_unit": "evaluation.duration (episodes)",
    "model_config": "model",
    "callbacks": "callbacks",
    "callbacks_class": "callbacks",
    "policies": "multi_agent.policies",
    "policy_mapping_fn": "multi_agent.policy_mapping",
}


def fixed_and_searched(spec: ExperimentSpec, space: dict[str, Domain]) -> list[SpecIssue]:
    """A key the spec both fixes (under `config` or `model`) and searches in the space it
    writes: one of the two would be silently ignored, so neither is chosen for the user.
    (A default space simply leaves out what the spec fixes.)"""
    if spec.search.space is None:
        return []
    model = spec.model  # (config.model_config is refused: the spec owns it)
    issues = []
    for key, dom in space.items():
        if key in spec.config:
            fixed, value = f"config.{key}", spec.config[key]
        elif key.startswith(MODEL_PREFIX) and key[len(MODEL_PREFIX) :] in model:
            fixed, value = f"model.{key[len(MODEL_PREFIX) :]}", model[key[len(MODEL_PREFIX) :]]
        else:
            continue
        issues.append(
            SpecIssue(
                loc=f"search.space.{key}",
                value=str(dom),
                msg=f"also fixed as {fixed} = {value!r}: fix it or search it, not both",
            )
        )
    return issues


def code_ref_issues(
    spec: ExperimentSpec, allowed_modules: Sequence[str] | None, space: dict[str, Domain]
) -> list[SpecIssue]:
    """The code a spec names that it may not: an import-path env and the spec's own code
    fields outside `allowed_modules` (None: not checked), and, for an RLlib algorithm,
    every value RLlib would turn into code (`config`, `model`, the space) that is neither
    one of RLlib's own classes nor an allowed import path. Checked as text, importing and
    building nothing: nothing may call RLlib on a spec while any of these stands."""
    allowed = list(allowed_modules) if allowed_modules is not None else None
    refs: list[SpecIssue] = []
    if allowed is not None and ":" in (spec.env or "") and not module_allowed(spec.env, allowed):
        refs.append(
            SpecIssue(
                loc="env",
                value=spec.env,
                msg=(
                    "this service accepts envs from "
                    + ", ".join(allowed)
                    + " (TUNER_ALLOWED_MODULES, formerly TUNER_ENV_MODULES; `tuner run "
                    "--allow-module`); use a gymnasium id"
                    if allowed
                    else _no_user_code(spec.env)
                ),
            )
        )
    if allowed is not None:
        refs += _spec_code_refs(spec, allowed)
    if spec.custom_algorithm:  # its `config` is its own data: RLlib never sees it
        return refs
    code_allowed = allowed or []
    # a key the spec owns is refused as such, whatever its value
    settings = {k: v for k, v in spec.config.items() if k not in OWNED_BY_SPEC}
    refs += check_code_refs(settings, loc="config", allowed_modules=code_allowed)
    refs += check_code_refs(spec.model, loc="model", allowed_modules=code_allowed)
    refs += check_space_code_refs(space, allowed_modules=code_allowed)
    return refs


def q_encoder_issues(spec: ExperimentSpec, space: dict[str, Domain]) -> list[SpecIssue]:
    """`model.q_encoder` (tuner/rllib/_sac_model.py): SAC only, one of its values, fixed
    or searched (as a choice or grid)."""
    found: list[tuple[str, Any]] = []
    if Q_ENCODER in spec.model:
        found.append((f"model.{Q_ENCODER}", spec.model[Q_ENCODER]))
    dom = space.get(MODEL_PREFIX + Q_ENCODER)
    if dom is not None:
        loc = f"search.space.{MODEL_PREFIX}{Q_ENCODER}"
        values = dom.choice if dom.choice is not None else dom.grid
        if values is None:
            return [SpecIssue(loc=loc, value=str(dom), msg="search it as a choice or grid")]
        found += [(loc, v) for v in values]
    issues = []
    for loc, value in found:
        if spec.base_algorithm != "SAC":
            msg = f"a SAC setting (its Q-network's inputs); {spec.base_algorithm} has none"
        elif value not in Q_ENCODERS:
            msg = f"must be one of {', '.join(Q_ENCODERS)}"
        else:
            continue
        issues.append(SpecIssue(loc=loc, value=value, msg=msg))
    return issues


def rllib_defaults(base_algorithm: str) -> dict[str, Any]:
    """RLlib's default config of an algorithm as a dict, with the per-learner batch size
    (a property its dict leaves out) as its default train_batch_size."""
    config = default_config(base_algorithm)
    defaults = config.to_dict()
    defaults.setdefault("train_batch_size_per_learner", config.train_batch_size)
    return defaults


def unknown_setting(loc: str, value: Any, algorithm: str, known: frozenset[str]) -> SpecIssue:
    """A key RLlib's algorithm does not know, with the closest one it does."""
    key = loc.rsplit(".", 1)[-1]
    msg = f"unknown RLlib {algorithm} setting{did_you_mean(key, known)}"
    return SpecIssue(loc=loc, value=value, msg=msg)


def env_id_issues(env: Any) -> list[SpecIssue]:
    """`env` where it is a gymnasium id gymnasium does not know, with the closest one it
    does (`CartPol-v1` -> `CartPole-v1`). A look-up in gymnasium's registry, as gym.make
    does it (an id without a version is its latest): nothing is built, nothing a spec
    names is imported. An import path, or an ALE id without ale-py here, is left to the
    env's build."""
    if not isinstance(env, str) or not GYM_ID_RE.fullmatch(env):
        return []
    import gymnasium as gym
    from gymnasium.envs.registration import find_highest_version, parse_env_id

    if is_ale_id(env):  # ALE ids exist once ale-py registers them
        try:
            import ale_py
        except ImportError:
            return []
        gym.register_envs(ale_py)
    if env in gym.registry:
        return []
    try:
        namespace, name, version = parse_env_id(env)
    except gym.error.Error:
        pass
    else:
        if version is None and find_highest_version(namespace, name) is not None:
            return []
    hint = did_you_mean(env, gym.registry)
    return [SpecIssue(loc="env", value=env, msg=f"not a registered gymnasium id{hint}")]


def unparsed_spec_issues(data: Any, found: Sequence[SpecIssue]) -> list[SpecIssue]:
    """For data that is no spec (its schema failed with `found`): the problems that need
    no valid spec, reported beside the schema's so one pass says them all: the unknown
    RLlib settings and strings among its number settings under `config` (where
    `algorithm` is one of ours) and an env id gymnasium does not know (where the schema
    said nothing about `env`). Only default configs and registries are read: nothing of
    the spec is built or imported."""
    issues = config_key_issues(data)
    if isinstance(data, dict) and not any(i.loc == "env" for i in found):
        issues += env_id_issues(data.get("env"))
    return issues


def config_key_issues(data: Any) -> list[SpecIssue]:
    """The unknown RLlib settings under a raw spec's `config`, and the strings among its
    number settings (for a spec whose schema failed: reported beside the schema's
    problems); none where its algorithm is not one of ours."""
    if not isinstance(data, dict) or not isinstance(data.get("config"), dict):
        return []
    algorithm = data.get("algorithm")
    if not isinstance(algorithm, str) or algorithm not in registry.names():
        return []
    base = registry.base_algorithm(algorithm)
    known = rllib_keys(base)
    config = {k: v for k, v in data["config"].items() if isinstance(k, str)}
    return [
        unknown_setting(f"config.{key}", value, base, known)
        for key, value in config.items()
        if key not in known and key not in OWNED_BY_SPEC
    ] + number_setting_issues(
        {k: v for k, v in config.items() if k in known and k not in OWNED_BY_SPEC},
        None,
        rllib_defaults(base),
        base,
    )


def normalize_issues(spec: ExperimentSpec, space: dict[str, Domain]) -> list[SpecIssue]:
    """`normalize_observations` is the env-to-module connector (RLlib's MeanStdFilter):
    not beside one of the spec's own, fixed or searched."""
    if not spec.normalize_observations:
        return []
    own = "env_to_module_connector"
    if own in spec.config or own in space:
        where = f"config.{own}" if own in spec.config else f"search.space.{own}"
        return [
            SpecIssue(
                loc="normalize_observations",
                value=True,
                msg=f"it is an env-to-module connector; {where} sets one too: normalize "
                "inside your own connector, or leave it out",
            )
        ]
    return []


def population_issues(spec: ExperimentSpec, space: dict[str, Domain]) -> list[SpecIssue]:
    """What pbt / pb2 cannot perturb in the space: grid keys (pbt), keys without
    [low, high] bounds (pb2), a space of model.* / env_config.* keys only."""
    issues: list[SpecIssue] = []
    for key, dom in space.items():
        if spec.scheduler.type == "pbt" and dom.kind == "grid":
            issues.append(
                SpecIssue(
                    loc=f"search.space.{key}",
                    value=str(dom),
                    msg="pbt mutates from sampled domains; use choice",
                )
            )
        if spec.scheduler.type == "pb2" and "." not in key and dom.kind not in PB2_KINDS:
            issues.append(
                SpecIssue(
                    loc=f"search.space.{key}",
                    value=str(dom),
                    msg=f"scheduler pb2 needs [low, high] bounds; {dom.kind} has none: use "
                    + ", ".join(PB2_KINDS)
                    + (
                        f" (search.space is omitted: this is {spec.algorithm}'s default space; "
                        "give search.space)"
                        if spec.search.space is None
                        else ""
                    ),
                )
            )
    if spec.scheduler.type in POPULATION_SCHEDULERS and not any("." not in k for k in space):
        issues.append(
            SpecIssue(
                loc="search.space",
                value=sorted(space),
                msg=f"scheduler {spec.scheduler.type} perturbs RLlib settings of the space, and "
                "it has none (model.* and env_config.* keys are sampled once per trial)",
            )
        )
    return issues


def _spec_code_refs(spec: ExperimentSpec, allowed: list[str]) -> list[SpecIssue]:
    """The spec's own code fields (callbacks, module) outside the allowed modules."""
    named = [(f"callbacks.{i}", path) for i, path in enumerate(spec.callbacks)]
    if spec.custom_algorithm:
        named.insert(0, ("algorithm", spec.algorithm))
    if spec.module:
        named.append(("module", spec.module))
    return [
        SpecIssue(
            loc=loc,
            value=path,
            msg=(
                "this service imports code only from "
                + ", ".join(allowed)
                + " (TUNER_ALLOWED_MODULES; `tuner run --allow-module`)"
                if allowed
                else _no_user_code(path)
            ),
        )
        for loc, path in named
        if not module_allowed(path, allowed)
    ]


def _no_user_code(path: str) -> str:
    """The refusal where no module is allowed, naming the one to allow for `path`."""
    module = path.partition(":")[0].split(".")[0] or "<module>"
    return (
        f"this service imports no user code (set TUNER_ALLOWED_MODULES={module}; "
        f"`tuner run --allow-module {module}`)"
    )


# -- what stops trials short of their budget: warnings, never errors. A scheduler counts in
# its `time_attr`; the budget-aware defaults apply where a budget is given in that unit.
# A budget's stop criterion and its unit as a person reads it, by the result key.
_BUDGETS = {
    STEP_KEY: ("stop.timesteps_total", "env steps"),
    ITERATION_KEY: ("stop.training_iteration", "iterations"),
    "time_total_s": ("stop.time_total_s", "s"),
}
# Algorithms whose iteration samples train_batch_size_per_learner env steps per learner.
_ON_POLICY = ("PPO", "APPO", "IMPALA")


def scheduler_warnings(spec: ExperimentSpec, space: dict[str, Domain]) -> list[str]:
    """Where the scheduler in force or a stop criterion stops trials short of their
    budget: a time_attr with no budget in its unit (the fixed fallbacks apply), an own
    max_t below the budget, or a stop.training_iteration that ends trials before
    stop.timesteps_total (whatever the scheduler, fifo too)."""
    sched = resolved_scheduler(spec, space)
    out = []
    if sched.halving or sched.type == "median":
        out += _fallback_warnings(spec, sched)
    short = _iterations_cut_steps(spec, space)
    if short:
        out.append(short)
    late = _evaluation_after_budget(spec, space, sched)
    if late:
        out.append(late)
    return out


def _fallback_warnings(spec: ExperimentSpec, sched: SchedulerSpec) -> list[str]:
    out = []
    unit = sched.time_attr or ITERATION_KEY
    given = [key for key in _BUDGETS if budget_in(spec, key)]
    if not budget_in(spec, unit) and given:
        field, words = _BUDGETS[given[0]]
        settings = (
            f"grace_period {sched.grace_period}, max_t {sched.max_t}"
            if sched.halving
            else f"grace_period {sched.grace_period}"
        )
        out.append(
            f"scheduler.time_attr {unit}: the budget is {field} ({budget_in(spec, given[0]):g} "
            f"{words}), not in {unit}, so {sched.type} falls back to {settings} {unit}: "
            "leave time_attr out to count progress in the budget's unit"
        )
    budget = budget_in(spec, unit)
    if sched.halving and budget and sched.max_t and sched.max_t < budget:
        field, words = _BUDGETS[unit]
        out.append(
            f"scheduler.max_t ({sched.max_t:g}) ends every trial short of its budget, "
            f"{field} ({budget:g} {words})"
        )
    return out


def _smallest(spec: ExperimentSpec, space: dict[str, Domain], key: str, default: Any) -> Any:
    """The smallest value a trial can run `key` with (the space's, else config's, else
    `default`), and whether the space varies it; None where it is not a number."""
    dom = space.get(key)
    if dom is None:
        value = spec.config.get(key, default)
        return (value, False) if isinstance(value, int | float) else (None, False)
    numbers = list(dom.args if dom.kind in ("choice", "grid") else dom.args[:1])
    if not numbers or not all(isinstance(v, int | float) for v in numbers):
        return None, True
    return min(numbers), True


def _steps_per_iteration(spec: ExperimentSpec, space: dict[str, Domain]) -> tuple[Any, bool, str]:
    """The fewest env steps a trial's iteration samples, whether the space varies it and
    the setting that sets it; (None, ...) where the iteration's size cannot be told (user
    code, or an iteration that also runs for a minimum time)."""
    if spec.custom_algorithm:
        return None, False, ""
    defaults = default_config(spec.base_algorithm)
    if spec.base_algorithm in _ON_POLICY:
        key = "train_batch_size_per_learner"
        batch, varies = _smallest(spec, space, key, defaults.total_train_batch_size)
        learners = max(1, int(spec.resources.num_learners or 1))
        return (batch * learners if batch else None), varies, key
    seconds, _ = _smallest(
        spec, space, "min_time_s_per_iteration", defaults.min_time_s_per_iteration
    )
    if seconds:  # the iteration runs on for a while: its size depends on the speed
        return None, False, ""
    key = "min_sample_timesteps_per_iteration"
    steps, varies = _smallest(spec, space, key, defaults.min_sample_timesteps_per_iteration)
    return (steps or None), varies, key


def _iterations_cut_steps(spec: ExperimentSpec, space: dict[str, Domain]) -> str | None:
    """A warning where stop.training_iteration ends trials before stop.timesteps_total
    (the iterations' known size: an on-policy rollout, or an off-policy iteration's
    minimum of env steps); None where it cannot or need not tell."""
    stop = spec.stop
    if not (stop.training_iteration and stop.timesteps_total):
        return None
    per_iteration, varies, key = _steps_per_iteration(spec, space)
    if not per_iteration:
        return None
    reach = stop.training_iteration * per_iteration
    if reach >= stop.timesteps_total:
        return None
    need = math.ceil(stop.timesteps_total / per_iteration)
    some = f"some trials (the smallest {key})" if varies else "every trial"
    about = "" if spec.base_algorithm in _ON_POLICY else "about "
    return (
        f"stop.training_iteration ({stop.training_iteration}) ends {some} at {about}"
        f"{reach:g} env steps, short of stop.timesteps_total ({stop.timesteps_total}): "
        f"at {per_iteration:g} env steps an iteration ({key}) it needs {need} iterations"
    )


def _evaluation_after_budget(
    spec: ExperimentSpec, space: dict[str, Domain], sched: SchedulerSpec
) -> str | None:
    """A warning where the scheduler judges an evaluation metric no trial reports before
    its budget's end (Tune's schedulers skip a result without their metric)."""
    interval = spec.evaluation.interval
    stopping = sched.halving or sched.type == "median"
    if not (stopping and interval and scheduler_metric(spec).startswith(EVALUATION_PREFIX)):
        return None
    unit = sched.time_attr or ITERATION_KEY
    budget = budget_in(spec, unit)
    per_iteration: Any = 1
    if unit == STEP_KEY:
        per_iteration, _, _ = _steps_per_iteration(spec, space)
    first = interval * (per_iteration or 0)
    if not budget or first < budget or unit not in (STEP_KEY, ITERATION_KEY):
        return None
    field, words = _BUDGETS[unit]
    at = "" if unit == ITERATION_KEY else f", {first:g} env steps or more"
    return (
        f"evaluation.interval ({interval}): the first evaluation comes at iteration "
        f"{interval}{at}, not before the budget's end, {field} ({budget:g} {words}), so "
        f"{sched.type} never sees {spec.metric} in time and stops no trial early: lower "
        "evaluation.interval, or leave it out (the scheduler then judges the training "
        "return and the final evaluation still ranks)"
    )


# -- what makes a sweep's Pareto front mislead (`objectives`): warnings, never errors

# results that only grow: under any scope but `last` a trial's value is not its total
_RUNNING_TOTAL = re.compile(r"(^|/)(time_total_s|timesteps_total|training_iteration)$|_lifetime$")


def objective_warnings(spec: ExperimentSpec) -> list[str]:
    """What makes a Pareto front mislead: a running total ranked under a scope other
    than `last`, and a scheduler that stops trials early (a trial stopped early looks
    cheap on every cost objective)."""
    if not spec.objectives:
        return []
    out = []
    if spec.scope != "last":
        totals = [o.metric for o in spec.objectives if _RUNNING_TOTAL.search(o.metric)]
        if totals:
            out.append(
                f"objectives {', '.join(totals)} only grow: under scope {spec.scope!r} a "
                "trial's value is not its total (use scope: last)"
            )
    if spec.scheduler.halving or spec.scheduler.type == "median":
        out.append(
            f"scheduler {spec.scheduler.type} stops trials early by the first objective: a "
            "trial stopped early looks cheap on the others and can join the Pareto front "
            "(use scheduler fifo)"
        )
    return out
