"""The checks of a spec that need RLlib, as one entry point: `validate_spec` runs the
list of checks (_checks.CHECKS) in one pass, in the list's order."""

from __future__ import annotations

from collections.abc import Sequence

from tuner.search_spaces import Domain
from tuner.spec import ExperimentSpec, SpecError, resolve_space
from tuner.validation._checks import CHECKS, Context


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
    """Checks what only RLlib can check: runs every check of a parsed spec in one pass.

    The checks run in the order of `CHECKS` (tuner/validation/_checks.py) and report in
    that order: first those that read the spec as text, all of them, then, where none
    found a problem, those that build RLlib's config, import the spec's code and build
    the env, the first failure ending the pass.

    A spec is data. Every value RLlib would turn into code (`type` in a `*_config`,
    `callbacks`, `*_class`, ..., in `config`, `model` and every search-space value) must
    be one of RLlib's own classes by short name (tuner/spec/rllib_classes.yaml) or an
    import path under `allowed_modules`; with `allowed_modules` (the service, the CLI), an
    import-path env must lie under one of them too. Both are checked before anything is
    imported.

    Args:
        spec: The parsed spec.
        build_env: Whether to build and reset the env once (RLlib's check of its
            spaces).
        allowed_modules: The modules the spec's code may come from (the operator's
            TUNER_ALLOWED_MODULES); None: code references are not checked.
        space: The resolved search space (`tuner.spec.resolve_space`, the one the fit
            and the plan use); resolved here when not given.
        import_user_code: Whether a module the spec names may be imported. Without it
            (the API's validator) none is: an import-path env is not built here (the
            driver builds it).
        max_trials: The service's limit of trials per sweep (TUNER_MAX_TRIALS); None:
            no limit.
        max_asha_rungs: The service's limit of ASHA rungs (TUNER_MAX_ASHA_RUNGS); None:
            no limit.

    Returns:
        The warnings to show the user, in the order the checks found them.

    Raises:
        SpecError: With every problem the text checks found, or else the one problem
            that ended the building checks, each naming its field.
    """
    ctx = Context(
        spec=spec,
        space=resolve_space(spec) if space is None else space,
        allowed_modules=allowed_modules,
        build_env=build_env,
        import_user_code=import_user_code,
        max_trials=max_trials,
        max_asha_rungs=max_asha_rungs,
    )
    return _validate(ctx)


def _validate(ctx: Context) -> list[str]:
    """Runs CHECKS in order until one sets `ctx.stop`; raises SpecError with the issues
    found, else returns the warnings."""
    for check in CHECKS:
        check(ctx)
        if ctx.stop:
            break
    if ctx.issues:
        raise SpecError(ctx.issues)
    return ctx.warnings
