"""The one validation pipeline, composed here once:

    strict parsing (untrusted text as plain data) -> the spec's schema -> the semantic
    checks that need RLlib -> the fit on the target nodes, or the plan

Every caller goes through `check_source`: `tuner validate / plan / run` with a file's
text, the API's validator worker with a request body (POST, the dry run, the web form).
Each stage reports every problem it finds, and the fit is checked beside the semantic
checks, so one pass returns all that can be found. Text that is no data ends the pass
there; data that is no spec still gets the checks that need no spec (unknown RLlib keys
of a known algorithm, the env id against gymnasium's registry). Code references are
checked first, as text: while one stands, nothing builds the RLlib config or the env.

The API runs it in a worker process, so the API process never imports RLlib (or
anything a spec names) and a pathological body cannot stall or crash its event loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tuner.search_spaces import Domain
from tuner.spec import (
    ExperimentSpec,
    NestingTooDeep,
    SpecError,
    check_data,
    load_json_strict,
    load_yaml_strict,
    parse_spec,
    resolve_space,
)
from tuner.views import Issue, Plan


@dataclass
class Checks:
    """What the pipeline checks beyond the schema, and against what.

    Attributes:
        allowed_modules: The modules the spec's code may come from; None: code
            references are not checked.
        nodes: The target nodes; None: not known.
        check_fit: Whether one trial must fit the nodes.
        build_env: Build the env once (RLlib's check of its spaces).
        import_user_code: Whether a module the spec names may be imported; False in the
            API's worker: nothing a spec names.
        max_trials: The service's limit of trials per sweep; None: no limit.
        max_asha_rungs: The service's limit of ASHA rungs; None: no limit.
        plan: Also plan it (the fit is then part of the plan, not an issue).
        tracking_uri: MLflow: where a warm start's earlier sweep is found.
    """

    allowed_modules: list[str] | None = None
    nodes: list[dict[str, float]] | None = None
    check_fit: bool = True
    build_env: bool = True
    import_user_code: bool = True
    max_trials: int | None = None
    max_asha_rungs: int | None = None
    plan: bool = False
    tracking_uri: str | None = None


@dataclass
class Checked:
    """The pipeline's answer: the spec and what it resolved, or every problem found.

    Attributes:
        spec: The parsed spec; None if it is not one.
        space: Its resolved search space, by parameter.
        warnings: The validation's warnings (and a warm start's).
        plan: The plan, when `Checks.plan` asked for one and no problem was found.
        issues: Every problem found; empty if none.
        too_deep: The text was nested too deep (HTTP 413).
    """

    spec: ExperimentSpec | None = None
    space: dict[str, Domain] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    plan: Plan | None = None
    issues: list[Issue] = field(default_factory=list)
    too_deep: bool = False

    @property
    def ok(self) -> bool:
        """Whether no problem was found."""
        return not self.issues

    def error(self) -> SpecError:
        """The problems as one SpecError.

        Returns:
            A SpecError carrying every issue.
        """
        return SpecError(self.issues)


def parse_text(text: str, yaml_text: bool) -> Any:
    """Reads untrusted text as plain data.

    JSON without NaN / Infinity, or YAML without tags, anchors or aliases; nested at
    most 32 deep; integers within int64, floats finite.

    Args:
        text: The spec's text.
        yaml_text: Whether it is YAML (else JSON).

    Returns:
        The data: dicts, lists, strings, numbers, booleans and None.

    Raises:
        NestingTooDeep: The data is nested too deep.
        SpecError: Naming the problem, for any other.
    """
    data = load_yaml_strict(text) if yaml_text else load_json_strict(text)
    issues = check_data(data)
    if issues:
        raise SpecError(issues)
    return data


def check_source(source: str | bytes, yaml_text: bool, checks: Checks) -> Checked:
    """Runs the whole pipeline on a spec's text.

    Strict parsing, the schema, the checks that need RLlib (`validate_spec`), then the
    fit, or the plan with `checks.plan`. Never raises for a bad spec: its problems are
    in the answer, every one a stage could find.

    Args:
        source: The spec's text; bytes must be UTF-8.
        yaml_text: Whether it is YAML (else JSON).
        checks: What to check beyond the schema, and against what.

    Returns:
        The spec, its resolved space, the warnings and the plan, or the issues.
    """
    out = Checked()
    try:
        if isinstance(source, bytes):
            try:
                source = source.decode("utf-8")
            except UnicodeDecodeError as err:
                raise SpecError.one(
                    "(body)", f"not UTF-8 text: {err.reason} at byte {err.start}"
                ) from None
        data = parse_text(source, yaml_text)
        try:
            out.spec = parse_spec(data)
        except SpecError as err:  # every problem at once: those that need no spec too
            from tuner.validation._issues import unparsed_spec_issues

            raise SpecError([*err.issues, *unparsed_spec_issues(data, err.issues)]) from None
        out.space = resolve_space(out.spec)  # once: validation, the fit and the plan share it
        _semantics(out, checks)
    except NestingTooDeep as err:
        out.issues, out.too_deep = list(err.issues), True
    except SpecError as err:
        out.issues = list(err.issues)
    except Exception as err:  # noqa: BLE001 - any other failure is still the spec's problem
        msg = f"cannot be checked: {type(err).__name__}: {str(err)[:300]}"
        out.issues = [Issue(loc="(spec)", msg=msg)]
    return out


def _semantics(out: Checked, checks: Checks) -> None:
    """The checks that need RLlib, then the fit (or the plan), each stage's problems
    gathered; raises SpecError with all of them."""
    from tuner.rllib import check_fits
    from tuner.validation._issues import code_ref_issues
    from tuner.validation._plan import plan_spec
    from tuner.validation._validate import validate_spec

    spec, issues = out.spec, []
    assert spec is not None
    # The fit builds the spec's RLlib config: never while it names code it may not (RLlib
    # would turn such a value into a class, or refuse it with its own words before ours).
    unresolved = code_ref_issues(spec, checks.allowed_modules, out.space)
    try:
        out.warnings = validate_spec(
            spec,
            build_env=checks.build_env,
            allowed_modules=checks.allowed_modules,
            import_user_code=checks.import_user_code,
            max_trials=checks.max_trials,
            max_asha_rungs=checks.max_asha_rungs,
            space=out.space,
        )
    except SpecError as err:
        issues += err.issues
    reused = None
    if not issues and spec.search.warm_start is not None and checks.tracking_uri:
        from tuner.tracking import find_earlier_sweep, warm_start

        try:  # the earlier sweep is there, of this algorithm: what it gives, said now
            earlier = find_earlier_sweep(checks.tracking_uri, spec.search.warm_start.from_)
            reused = warm_start(spec, out.space, earlier)
            out.warnings += reused.warnings
        except SpecError as err:
            issues += err.issues
    if checks.plan and not issues:
        out.plan = plan_spec(spec, checks.nodes, check_fit=checks.check_fit, space=out.space)
        out.plan.warnings = list(out.warnings)
        if reused is not None:
            out.plan.warm_start = {
                "from": reused.source,
                "parent_run_id": reused.parent_run_id,
                "first": reused.first,
                "told_to_optuna": len(reused.known),
                "warnings": reused.warnings,
            }
    elif checks.nodes is not None and checks.check_fit and not checks.plan and not unresolved:
        try:
            check_fits(spec, checks.nodes)
        except SpecError as err:
            issues += [i for i in err.issues if i not in issues]
        except Exception:
            if not issues:
                raise
            # RLlib refused to build the config for the fit: the issues above say why
    if issues:
        raise SpecError(issues)


def one_issue(loc: str, msg: str, value: Any = None) -> dict[str, Any]:
    """A worker's answer for a body refused with one problem.

    Args:
        loc: Where the problem is (a field path, or "(body)").
        msg: What it is.
        value: The bad value, if any.

    Returns:
        {"issues": [{loc, msg, value}]}, as plain JSON data.
    """
    return {"issues": [Issue(loc=loc, msg=msg, value=value).model_dump(mode="json")]}


def check_body(raw: bytes, yaml_body: bool, checks: Checks) -> dict[str, Any]:
    """The API worker's answer for a request body (`check_source` on it).

    Args:
        raw: The request body, UTF-8.
        yaml_body: Whether it is YAML (else JSON).
        checks: What to check beyond the schema, and against what.

    Returns:
        Plain JSON data: {"spec": validated spec JSON, "warnings": [...]}, {"plan": Plan
        JSON} with `checks.plan`, or {"issues": [{loc, msg, value}]} (with "status": 413
        for a body nested too deep).
    """
    checked = check_source(raw, yaml_body, checks)
    if not checked.ok:
        answer: dict[str, Any] = {"issues": [i.model_dump(mode="json") for i in checked.issues]}
        if checked.too_deep:
            answer["status"] = 413
        return answer
    assert checked.spec is not None
    if checked.plan is not None:
        return {"plan": checked.plan.model_dump(mode="json")}
    return {"spec": checked.spec.model_dump(mode="json"), "warnings": checked.warnings}


def warm_up() -> bool:
    """Imports RLlib in the API's worker ahead of the first request.

    Returns:
        True, once the pipeline's modules are imported.
    """
    import tuner.rllib
    import tuner.validation._plan
    import tuner.validation._validate  # noqa: F401

    return True
