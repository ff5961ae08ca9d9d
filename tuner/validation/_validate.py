"""Checks of a spec that need RLlib: config keys, the built config, the env."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tuner import algorithms as registry
from tuner.rllib import (
    ENV_CONFIG_PREFIX,
    MODEL_PREFIX,
    Q_ENCODER,
    Q_ENCODERS,
    build_config,
    check_env,
    default_config,
    preset_warnings,
    rllib_keys,
)
from tuner.search_spaces import PB2_KINDS, Domain
from tuner.spec import (
    GYM_ID_RE,
    IMPORT_PATH_RE,
    POPULATION_SCHEDULERS,
    ExperimentSpec,
    SpecError,
    SpecIssue,
    check_code_refs,
    check_space_code_refs,
    did_you_mean,
    integral_floats_as_ints,
    is_ale_id,
    module_allowed,
    number_setting_issues,
    resolve_space,
    resolved_scheduler,
    search_trials,
)
from tuner.validation._objectives import objective_warnings
from tuner.validation._scheduler import scheduler_warnings

# Spec sections own these; setting them under `config` would fight the spec.
_OWNED_BY_SPEC = {
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


def _fixed_and_searched(spec: ExperimentSpec, space: dict[str, Domain]) -> list[SpecIssue]:
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


def validate_spec(
    spec: ExperimentSpec,
    *,
    build_env: bool = True,
    allowed_modules: Sequence[str] | None = None,
    space: dict[str, Domain] | None = None,
    import_user_code: bool = True,
    max_trials: int | None = None,
    max_asha_rungs: int | None = None,
) -> list[str]:
    """Checks what only RLlib can check; returns warnings, raises SpecError. `space` is
    the resolved search space (resolved here when not given). `max_trials` and
    `max_asha_rungs`: a service's limits (TUNER_MAX_TRIALS, TUNER_MAX_ASHA_RUNGS).

    A spec is data. Every value RLlib would turn into code (`type` in a `*_config`,
    `callbacks`, `*_class`, ..., in `config`, `model` and every search-space value) must
    be one of RLlib's own classes by short name (tuner/spec/rllib_classes.yaml) or an import
    path under `allowed_modules`; with `allowed_modules` (the service, the CLI), an
    import-path env must lie under one of them too. Both are checked before anything is
    imported. Without `import_user_code` (the API's validator) no module a spec names
    is imported at all: an import-path env is not built here (the driver builds it)."""
    space = resolve_space(spec) if space is None else space
    warnings = _validate(
        spec, build_env, allowed_modules, space, import_user_code, max_trials, max_asha_rungs
    )
    return [*warnings, *scheduler_warnings(spec, space), *objective_warnings(spec)]


def _validate(
    spec: ExperimentSpec,
    build_env: bool,
    allowed_modules: Sequence[str] | None,
    space: dict[str, Domain],
    import_user_code: bool,
    max_trials: int | None,
    max_asha_rungs: int | None,
) -> list[str]:
    refs = code_ref_issues(spec, allowed_modules, space)
    refs += _limits(spec, space, max_trials, max_asha_rungs)
    refs += _fixed_and_searched(spec, space)
    if spec.custom_algorithm:
        return _validate_custom(spec, refs, space, build_env, import_user_code)
    for key, dom in space.items():
        if key in _OWNED_BY_SPEC:
            refs.append(
                SpecIssue(
                    loc=f"search.space.{key}",
                    value=str(dom),
                    msg=f"the spec owns it: set it as `{_OWNED_BY_SPEC[key]}`, not searched",
                )
            )
    user_code = any(
        isinstance(v, str) and IMPORT_PATH_RE.fullmatch(v)
        for v in _strings(spec.config) + _strings(spec.model)
    )
    issues: list[SpecIssue] = []
    warnings = preset_warnings(spec.algorithm)
    if spec.scheduler.type in POPULATION_SCHEDULERS and search_trials(spec, space) < 2:
        warnings.append(
            f"scheduler {spec.scheduler.type} with one trial perturbs nothing: a trial "
            "only ever clones a better one (search.num_samples >= 2, 4 or more to be useful)"
        )
    known = rllib_keys(spec.base_algorithm)
    for key, value in spec.config.items():
        if key in _OWNED_BY_SPEC:
            issues.append(
                SpecIssue(
                    loc=f"config.{key}",
                    value=value,
                    msg=f"set it as `{_OWNED_BY_SPEC[key]}` in the spec",
                )
            )
        elif key not in known:
            issues.append(unknown_setting(f"config.{key}", value, spec.base_algorithm, known))
    if spec.config.get("noisy") and "noisy=True" not in " ".join(warnings):
        warnings.append(
            "noisy=True is accepted but has no effect on RLlib 2.60's new API "
            "stack: exploration stays epsilon-greedy"
        )
    for key, dom in space.items():
        prefix = next((p for p in (MODEL_PREFIX, ENV_CONFIG_PREFIX) if key.startswith(p)), None)
        if prefix:
            if not key[len(prefix) :] or "." in key[len(prefix) :]:
                issues.append(
                    SpecIssue(
                        loc=f"search.space.{key}",
                        value=str(dom),
                        msg=f"name one key after {prefix!r}",
                    )
                )
        elif key not in known:
            issues.append(
                unknown_setting(f"search.space.{key}", str(dom), spec.base_algorithm, known)
            )
    defaults = rllib_defaults(spec.base_algorithm)
    issues += number_setting_issues(
        {k: v for k, v in spec.config.items() if k in known and k not in _OWNED_BY_SPEC},
        space,
        defaults,
        spec.base_algorithm,
    )
    # the spec's own values only: a default space is shared data, written as RLlib wants
    integral_floats_as_ints(spec.config, spec.search.space, defaults)
    issues += q_encoder_issues(spec, space)
    issues += population_issues(spec, space)
    issues += normalize_issues(spec, space)
    issues += env_id_issues(spec.env)
    if refs or issues:  # every problem at once; nothing above built or imported anything
        raise SpecError([*refs, *issues])
    if user_code:  # RLlib would import them while building the config: the driver checks
        warnings.append(
            "the config names code by import path: RLlib's own checks of the built config "
            "run when the sweep starts"
        )
    else:
        try:
            config = build_config(spec)
            config.validate()
        except Exception as err:  # noqa: BLE001 - RLlib raises ValueError and friends
            raise SpecError(
                [SpecIssue(loc="config", value=spec.config, msg=f"RLlib rejects the config: {err}")]
            ) from None
    if import_user_code:
        check_user_code(spec)
    if build_env and (import_user_code or ":" not in spec.env):
        warnings += check_env(
            spec.env,
            spec.env_config,
            spec.wrappers,
            multi_agent=spec.multi_agent,
            metric=spec.metric,
        )
    return warnings


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
    settings = {k: v for k, v in spec.config.items() if k not in _OWNED_BY_SPEC}
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
        if key not in known and key not in _OWNED_BY_SPEC
    ] + number_setting_issues(
        {k: v for k, v in config.items() if k in known and k not in _OWNED_BY_SPEC},
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


def _limits(
    spec: ExperimentSpec,
    space: dict[str, Domain],
    max_trials: int | None,
    max_asha_rungs: int | None,
) -> list[SpecIssue]:
    """The service's limits the spec exceeds, each naming its setting."""
    issues = []
    trials = search_trials(spec, space)
    if max_trials is not None and trials > max_trials:
        issues.append(
            SpecIssue(
                loc="search",
                value=trials,
                msg=f"makes {trials} trials (grid size x num_samples); this service runs at "
                f"most {max_trials} per sweep (TUNER_MAX_TRIALS)",
            )
        )
    rungs = resolved_scheduler(spec, space).asha_rungs()
    if max_asha_rungs is not None and rungs > max_asha_rungs:
        issues.append(
            SpecIssue(
                loc="scheduler",
                value=rungs,
                msg=f"max_t / grace_period / reduction_factor make {rungs} ASHA rungs; this "
                f"service allows at most {max_asha_rungs} (TUNER_MAX_ASHA_RUNGS): raise "
                "grace_period or reduction_factor",
            )
        )
    return issues


def _validate_custom(
    spec: ExperimentSpec,
    refs: list[SpecIssue],
    space: dict[str, Domain],
    build_env: bool,
    import_user_code: bool,
) -> list[str]:
    """validate_spec for the spec's own training loop: its `config` is its own data (RLlib
    never sees it); the loop must be a Trainable subclass, a function or a generator."""
    from tuner.rllib import KINDS, is_function, kind_of

    for key, dom in space.items():
        if key.startswith(MODEL_PREFIX):
            refs.append(
                SpecIssue(
                    loc=f"search.space.{key}",
                    value=str(dom),
                    msg="`model.` keys are RLlib's; your training loop gets plain config keys",
                )
            )
    refs += population_issues(spec, space)
    refs += env_id_issues(spec.env)
    if spec.normalize_observations:
        refs.append(
            SpecIssue(
                loc="normalize_observations",
                value=True,
                msg="RLlib's MeanStdFilter connector; your training loop sees the env "
                "as it is: normalize inside it",
            )
        )
    if refs:
        raise SpecError(refs)
    warnings: list[str] = []
    if not import_user_code:
        return warnings
    from tuner.rllib import load_object

    try:
        obj = load_object(spec.algorithm)
    except Exception as err:  # noqa: BLE001 - an import runs arbitrary module code
        raise SpecError.one("algorithm", f"cannot import it: {err!r}", spec.algorithm) from None
    if kind_of(obj) is None:
        raise SpecError.one(
            "algorithm", f"not a training loop: use a {', a '.join(KINDS)}", spec.algorithm
        )
    if is_function(spec.algorithm) and (spec.checkpoint.frequency or spec.checkpoint.at_end):
        warnings.append(
            "checkpoint.frequency / at_end: a function saves its own checkpoints "
            "(tune.report(metrics, checkpoint=...)); the spec's settings apply to a "
            "Trainable subclass"
        )
    if build_env and spec.env is not None:
        warnings += check_env(spec.env, spec.env_config)
    return warnings


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


def check_user_code(spec: ExperimentSpec) -> None:
    """Imports the spec's callbacks and module (already checked against the allowed
    modules) and checks what they are; raises SpecError naming the field."""
    from ray.rllib.callbacks.callbacks import RLlibCallback
    from ray.rllib.core.rl_module.rl_module import RLModule

    from tuner.rllib import load_object

    wanted = [(f"callbacks.{i}", p, RLlibCallback) for i, p in enumerate(spec.callbacks)]
    if spec.module:
        wanted.append(("module", spec.module, RLModule))
    issues = []
    for loc, path, base in wanted:
        try:
            obj = load_object(path)
        except Exception as err:  # noqa: BLE001 - an import runs arbitrary module code
            issues.append(SpecIssue(loc=loc, value=path, msg=f"cannot import it: {err!r}"))
            continue
        if not (isinstance(obj, type) and issubclass(obj, base)):
            issues.append(
                SpecIssue(loc=loc, value=path, msg=f"not a subclass of RLlib's {base.__name__}")
            )
    if issues:
        raise SpecError(issues)


def _strings(data: object) -> list[str]:
    if isinstance(data, dict):
        return [s for v in data.values() for s in _strings(v)]
    if isinstance(data, list | tuple):
        return [s for v in data for s in _strings(v)]
    return [data] if isinstance(data, str) else []
