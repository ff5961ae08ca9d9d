"""The checks of a spec that need RLlib, as a list run in one pass (`CHECKS`).

A check is a small function of one `Context`: it reads the spec, the resolved space and
the options, and adds what it finds to the context's `issues` and `warnings`. The
pipeline's order is the list's order, and so is the order of what it reports. Two
stages, so that nothing is built or imported while a problem stands:

1. text: every check up to `stop_where_problems_stand` reads the spec as data (and
   RLlib's default configs, gymnasium's registry) and reports every problem at once;
2. building: RLlib's config, the spec's own code, the env, each of which may fail.

A check that finds what later checks cannot go past sets `stop`; the checks after it do
not run, and the pipeline raises SpecError with the issues. A check that applies to one
kind of algorithm (RLlib's, or a training loop of the spec's own) says so first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from tuner.rllib import (
    ENV_CONFIG_PREFIX,
    MODEL_PREFIX,
    build_config,
    check_env,
    preset_warnings,
    rllib_keys,
)
from tuner.search_spaces import UPDATES_PER_ENV_STEP, Domain
from tuner.spec import (
    IMPORT_PATH_RE,
    POPULATION_SCHEDULERS,
    ExperimentSpec,
    SpecError,
    SpecIssue,
    integral_floats_as_ints,
    number_setting_issues,
    search_trials,
)
from tuner.validation._issues import (
    OWNED_BY_SPEC,
    code_ref_issues,
    env_id_issues,
    fixed_and_searched,
    normalize_issues,
    objective_warnings,
    population_issues,
    q_encoder_issues,
    rllib_defaults,
    scheduler_warnings,
    unknown_setting,
)
from tuner.validation._limits import bracket_issues, limit_issues


@dataclass
class Context:
    """What the checks share: the spec, its resolved space, the options, and what they
    found so far."""

    spec: ExperimentSpec
    space: dict[str, Domain]
    allowed_modules: Sequence[str] | None = None  # None: code references are not checked
    build_env: bool = True  # build the env once
    import_user_code: bool = True  # False: no module a spec names is imported
    max_trials: int | None = None  # the service's limits
    max_asha_rungs: int | None = None
    issues: list[SpecIssue] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    stop: bool = False  # the checks after the one that set it do not run

    @property
    def rllib(self) -> bool:
        """Whether the algorithm is RLlib's (not a training loop of the spec's own)."""
        return not self.spec.custom_algorithm

    @cached_property
    def known(self) -> frozenset[str]:
        """RLlib's settings of the spec's algorithm."""
        return rllib_keys(self.spec.base_algorithm)

    @cached_property
    def defaults(self) -> dict[str, Any]:
        """RLlib's default config of the spec's algorithm, as a dict."""
        return rllib_defaults(self.spec.base_algorithm)

    def refuse(self, issues: Sequence[SpecIssue]) -> None:
        """Records problems the checks after this one cannot go past."""
        self.issues += issues
        self.stop = True


Check = Callable[[Context], None]


# -- stage 1: the spec as text ------------------------------------------------------


def check_code_refs(ctx: Context) -> None:
    """The code the spec names that it may not (`code_ref_issues`), first: while one
    stands, nothing calls RLlib on the spec."""
    ctx.issues += code_ref_issues(ctx.spec, ctx.allowed_modules, ctx.space)


def check_limits(ctx: Context) -> None:
    """The service's limits: trials per sweep, ASHA rungs; hyperband's brackets within
    its rungs."""
    ctx.issues += limit_issues(ctx.spec, ctx.space, ctx.max_trials, ctx.max_asha_rungs)
    ctx.issues += bracket_issues(ctx.spec, ctx.space)


def check_fixed_and_searched(ctx: Context) -> None:
    """No key both fixed (under `config` or `model`) and searched."""
    ctx.issues += fixed_and_searched(ctx.spec, ctx.space)


def check_own_loop_space(ctx: Context) -> None:
    """A training loop of the spec's own: no `model.` keys in the space (RLlib's)."""
    if ctx.rllib:
        return
    ctx.issues += [
        SpecIssue(
            loc=f"search.space.{key}",
            value=str(dom),
            msg="`model.` keys are RLlib's; your training loop gets plain config keys",
        )
        for key, dom in ctx.space.items()
        if key.startswith(MODEL_PREFIX)
    ]


def check_owned_in_space(ctx: Context) -> None:
    """RLlib's algorithms: no searched key that a spec section owns (`env`, `seed`, ...)."""
    if not ctx.rllib:
        return
    ctx.issues += [
        SpecIssue(
            loc=f"search.space.{key}",
            value=str(dom),
            msg=f"the spec owns it: set it as `{OWNED_BY_SPEC[key]}`, not searched",
        )
        for key, dom in ctx.space.items()
        if key in OWNED_BY_SPEC
    ]


def warn_preset(ctx: Context) -> None:
    """RLlib's algorithms: what a preset's settings do not do on RLlib's new API stack."""
    if ctx.rllib:
        ctx.warnings += preset_warnings(ctx.spec.algorithm)


def warn_population_of_one(ctx: Context) -> None:
    """RLlib's algorithms: pbt / pb2 with one trial perturbs nothing."""
    spec = ctx.spec
    if (
        ctx.rllib
        and spec.scheduler.type in POPULATION_SCHEDULERS
        and search_trials(spec, ctx.space) < 2
    ):
        ctx.warnings.append(
            f"scheduler {spec.scheduler.type} with one trial perturbs nothing: a trial "
            "only ever clones a better one (search.num_samples >= 2, 4 or more to be useful)"
        )


def check_config_keys(ctx: Context) -> None:
    """RLlib's algorithms: every key under `config` is RLlib's and not the spec's own."""
    if not ctx.rllib:
        return
    spec = ctx.spec
    for key, value in spec.config.items():
        if key in OWNED_BY_SPEC:
            ctx.issues.append(
                SpecIssue(
                    loc=f"config.{key}",
                    value=value,
                    msg=f"set it as `{OWNED_BY_SPEC[key]}` in the spec",
                )
            )
        elif key not in ctx.known and key != UPDATES_PER_ENV_STEP:  # its own check
            ctx.issues.append(
                unknown_setting(f"config.{key}", value, spec.base_algorithm, ctx.known)
            )


def warn_noisy(ctx: Context) -> None:
    """RLlib's algorithms: `noisy=True` has no effect on RLlib 2.60's new API stack."""
    if ctx.rllib and ctx.spec.config.get("noisy") and "noisy=True" not in " ".join(ctx.warnings):
        ctx.warnings.append(
            "noisy=True is accepted but has no effect on RLlib 2.60's new API "
            "stack: exploration stays epsilon-greedy"
        )


def warn_torch_compile(ctx: Context) -> None:
    """RLlib's algorithms: `torch_compile_learner` compiles nothing where the installed
    RLlib skips the modules (tuner.ray_internals.learner_compile_skips_modules)."""
    config = ctx.spec.config
    if not (ctx.rllib and config.get("torch_compile_learner") is True):
        return
    if config.get("torch_compile_learner_what_to_compile") == "complete_update":
        return
    from tuner.ray_internals import learner_compile_skips_modules

    if learner_compile_skips_modules():
        ctx.warnings.append(
            "torch_compile_learner=True compiles nothing on RLlib 2.60's new API stack "
            "(its TorchLearner tests the MultiRLModule, not each module, before compiling): "
            "the trial runs eager; torch_compile_learner_what_to_compile=complete_update "
            "compiles the whole update (slower on CPU, docs/benchmarks.md#torchcompile)"
        )


def check_space_keys(ctx: Context) -> None:
    """RLlib's algorithms: every key of the space is RLlib's, names one `model.` /
    `env_config.` key, or is `updates_per_env_step` (check_updates_per_env_step)."""
    if not ctx.rllib:
        return
    for key, dom in ctx.space.items():
        prefix = next((p for p in (MODEL_PREFIX, ENV_CONFIG_PREFIX) if key.startswith(p)), None)
        if prefix:
            if not key[len(prefix) :] or "." in key[len(prefix) :]:
                ctx.issues.append(
                    SpecIssue(
                        loc=f"search.space.{key}",
                        value=str(dom),
                        msg=f"name one key after {prefix!r}",
                    )
                )
        elif key not in ctx.known and key != UPDATES_PER_ENV_STEP:
            ctx.issues.append(
                unknown_setting(f"search.space.{key}", str(dom), ctx.spec.base_algorithm, ctx.known)
            )


def check_updates_per_env_step(ctx: Context) -> None:
    """RLlib's algorithms: `updates_per_env_step` (tuner.search_spaces) only in a space,
    for an algorithm with RLlib's training_intensity, not beside it, over numbers > 0."""
    spec, key, intensity = ctx.spec, UPDATES_PER_ENV_STEP, "training_intensity"
    if not ctx.rllib:
        return
    if key in spec.config:
        msg = f"a search-space key only: fix RLlib's {intensity} instead (samples trained "
        msg += "per env step: updates per env step x the train batch of all learners; with N "
        msg += "remote env runners RLlib trains (N + 1) / N x its intensity)"
        ctx.issues.append(SpecIssue(loc=f"config.{key}", value=spec.config[key], msg=msg))
    dom = ctx.space.get(key)
    if dom is None or key not in (spec.search.space or {}):
        return  # a default space's is valid by construction
    values = list(dom.args) if dom.kind in ("choice", "grid") else [dom.args[0]]
    if intensity not in ctx.known:
        msg = f"{spec.base_algorithm} has no update ratio to search (RLlib's {intensity}: DQN, SAC)"
    elif intensity in spec.config or intensity in ctx.space:
        where = f"config.{intensity}" if intensity in spec.config else "search.space"
        msg = f"sets {intensity}, which {where} sets too: set the ratio one way"
    elif not all(isinstance(v, int | float) and not isinstance(v, bool) and v > 0 for v in values):
        msg = "updates per env step are numbers above 0"
    else:
        return
    ctx.issues.append(SpecIssue(loc=f"search.space.{key}", value=str(dom), msg=msg))


def check_number_settings(ctx: Context) -> None:
    """RLlib's algorithms: RLlib's number settings, fixed or searched, are numbers of
    their kind; then the spec's own integral floats are written as the ints RLlib
    wants."""
    if not ctx.rllib:
        return
    spec = ctx.spec
    ctx.issues += number_setting_issues(
        {k: v for k, v in spec.config.items() if k in ctx.known and k not in OWNED_BY_SPEC},
        ctx.space,
        ctx.defaults,
        spec.base_algorithm,
    )
    # the spec's own values only: a default space is shared data, written as RLlib wants
    integral_floats_as_ints(spec.config, spec.search.space, ctx.defaults)


def check_q_encoder(ctx: Context) -> None:
    """RLlib's algorithms: `model.q_encoder`, SAC only, one of its values."""
    if ctx.rllib:
        ctx.issues += q_encoder_issues(ctx.spec, ctx.space)


def check_population(ctx: Context) -> None:
    """What pbt / pb2 cannot perturb in the space."""
    ctx.issues += population_issues(ctx.spec, ctx.space)


def check_normalize_connector(ctx: Context) -> None:
    """RLlib's algorithms: `normalize_observations` not beside a connector of the spec's."""
    if ctx.rllib:
        ctx.issues += normalize_issues(ctx.spec, ctx.space)


def check_env_id(ctx: Context) -> None:
    """A gymnasium id `env` is one gymnasium knows."""
    ctx.issues += env_id_issues(ctx.spec.env)


def check_own_loop_normalize(ctx: Context) -> None:
    """A training loop of the spec's own: no `normalize_observations` (RLlib's
    connector)."""
    if ctx.rllib or not ctx.spec.normalize_observations:
        return
    ctx.issues.append(
        SpecIssue(
            loc="normalize_observations",
            value=True,
            msg="RLlib's MeanStdFilter connector; your training loop sees the env "
            "as it is: normalize inside it",
        )
    )


def stop_where_problems_stand(ctx: Context) -> None:
    """Every problem found so far, at once: nothing after this builds or imports a spec
    that has one."""
    ctx.stop = bool(ctx.issues)


# -- stage 2: building ---------------------------------------------------------------


def check_rllib_builds(ctx: Context) -> None:
    """RLlib's algorithms: RLlib builds and validates the config, unless it names code
    by import path (RLlib would import it: the driver checks it when the sweep starts)."""
    if not ctx.rllib:
        return
    spec = ctx.spec
    if any(isinstance(v, str) and IMPORT_PATH_RE.fullmatch(v) for v in _config_strings(spec)):
        ctx.warnings.append(
            "the config names code by import path: RLlib's own checks of the built config "
            "run when the sweep starts"
        )
        return
    try:
        config = build_config(spec)
        config.validate()
    except Exception as err:  # noqa: BLE001 - RLlib raises ValueError and friends
        issue = SpecIssue(loc="config", value=spec.config, msg=f"RLlib rejects the config: {err}")
        ctx.refuse([issue])


def check_user_code(ctx: Context) -> None:
    """RLlib's algorithms, where user code may be imported: the spec's callbacks and
    module import, and are RLlib's kinds (`user_code_issues`)."""
    if ctx.rllib and ctx.import_user_code:
        issues = user_code_issues(ctx.spec)
        if issues:
            ctx.refuse(issues)


def check_own_loop(ctx: Context) -> None:
    """A training loop of the spec's own, where user code may be imported: it imports
    and is a Trainable subclass, a function or a generator."""
    if ctx.rllib or not ctx.import_user_code:
        return
    from tuner.rllib import KINDS, is_function, kind_of, load_object

    spec = ctx.spec
    try:
        obj = load_object(spec.algorithm)
    except Exception as err:  # noqa: BLE001 - an import runs arbitrary module code
        ctx.refuse([_algorithm_issue(f"cannot import it: {err!r}", spec.algorithm)])
        return
    if kind_of(obj) is None:
        msg = f"not a training loop: use a {', a '.join(KINDS)}"
        ctx.refuse([_algorithm_issue(msg, spec.algorithm)])
        return
    if is_function(spec.algorithm) and (spec.checkpoint.frequency or spec.checkpoint.at_end):
        ctx.warnings.append(
            "checkpoint.frequency / at_end: a function saves its own checkpoints "
            "(tune.report(metrics, checkpoint=...)); the spec's settings apply to a "
            "Trainable subclass"
        )


def check_env_builds(ctx: Context) -> None:
    """The env builds and resets once (`check_env`): with `build_env`, and, for an env
    by import path or a training loop's env, only where user code may be imported."""
    spec = ctx.spec
    if not ctx.build_env:
        return
    try:
        if ctx.rllib and (ctx.import_user_code or ":" not in spec.env):
            ctx.warnings += check_env(
                spec.env,
                spec.env_config,
                spec.wrappers,
                multi_agent=spec.multi_agent,
                metric=spec.metric,
            )
        elif not ctx.rllib and ctx.import_user_code and spec.env is not None:
            ctx.warnings += check_env(spec.env, spec.env_config)
    except SpecError as err:
        ctx.refuse(err.issues)


def warn_scheduler(ctx: Context) -> None:
    """What the scheduler in force will do with the spec's budget (`scheduler_warnings`)."""
    ctx.warnings += scheduler_warnings(ctx.spec, ctx.space)


def warn_objective(ctx: Context) -> None:
    """What the metric and its objectives will do (`objective_warnings`)."""
    ctx.warnings += objective_warnings(ctx.spec)


CHECKS: tuple[Check, ...] = (
    check_code_refs,
    check_limits,
    check_fixed_and_searched,
    check_own_loop_space,
    check_owned_in_space,
    warn_preset,
    warn_population_of_one,
    check_config_keys,
    warn_noisy,
    warn_torch_compile,
    check_space_keys,
    check_updates_per_env_step,
    check_number_settings,
    check_q_encoder,
    check_population,
    check_normalize_connector,
    check_env_id,
    check_own_loop_normalize,
    stop_where_problems_stand,
    check_rllib_builds,
    check_user_code,
    check_own_loop,
    check_env_builds,
    warn_scheduler,
    warn_objective,
)


def user_code_issues(spec: ExperimentSpec) -> list[SpecIssue]:
    """Imports the spec's callbacks and module (already checked against the allowed
    modules) and checks what they are; the problems, each naming its field."""
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
    return issues


def _algorithm_issue(msg: str, value: str) -> SpecIssue:
    return SpecIssue(loc="algorithm", msg=msg, value=value)


def _config_strings(spec: ExperimentSpec) -> list[str]:
    """Every string in the spec's `config` and `model`, however deep."""
    return _strings(spec.config) + _strings(spec.model)


def _strings(data: object) -> list[str]:
    if isinstance(data, dict):
        return [s for v in data.values() for s in _strings(v)]
    if isinstance(data, list | tuple):
        return [s for v in data for s in _strings(v)]
    return [data] if isinstance(data, str) else []
