"""Request bodies parsed and specs validated in a worker process, so the API process
never imports RLlib (or anything a spec names) and a pathological body cannot stall or
crash its event loop."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tuner._safe_input import NestingTooDeep, check_data, load_json_strict, load_yaml_strict
from tuner.search_spaces import Domain, resolve_space
from tuner.spec import SpecError
from tuner.views import Issue


def one_issue(loc: str, msg: str, value: Any = None) -> dict[str, Any]:
    """The answer of a body refused with one problem."""
    return {"issues": [Issue(loc=loc, msg=msg, value=value).model_dump(mode="json")]}


def parse_body(raw: bytes, yaml_body: bool) -> Any:
    """The body as plain data: UTF-8; JSON without NaN / Infinity, or YAML without tags,
    anchors or aliases; nested at most 32 deep; integers within int64, floats finite.
    Raises SpecError naming the problem (NestingTooDeep for depth)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise SpecError.one("(body)", f"not UTF-8 text: {err.reason} at byte {err.start}") from None
    data = load_yaml_strict(text) if yaml_body else load_json_strict(text)
    issues = check_data(data)
    if issues:
        raise SpecError(issues)
    return data


def check_body(
    raw: bytes,
    yaml_body: bool,
    allowed_modules: list[str],
    nodes: list[dict[str, float]] | None = None,
    max_trials: int | None = None,
    max_asha_rungs: int | None = None,
) -> dict[str, Any]:
    """{"spec": validated spec JSON, "warnings": [...]} or {"issues": [{loc, msg, value}]}
    (with "status": 413 for a body nested too deep). `max_trials`, `max_asha_rungs`: the
    service's limits.

    Nothing the spec names is imported here: code references and import-path envs are
    checked against `allowed_modules` as text. With `nodes` (each alive node's total
    resources), a spec whose one trial can never be placed on them is refused too."""
    from tuner.trials import check_fits

    def check(spec: Any) -> dict[str, Any]:
        warnings = _validate(spec, allowed_modules, max_trials, max_asha_rungs)
        if nodes:
            check_fits(spec, nodes)
        return {"spec": spec.model_dump(mode="json"), "warnings": warnings}

    return _answer(raw, yaml_body, check)


def plan_body(
    raw: bytes,
    yaml_body: bool,
    allowed_modules: list[str],
    nodes: list[dict[str, float]] | None,
    check_fit: bool,
    max_trials: int | None = None,
    max_asha_rungs: int | None = None,
) -> dict[str, Any]:
    """{"plan": Plan JSON} for a valid spec (whether it fits is part of the plan) or
    {"issues": [...]} (with "status": 413 for a body nested too deep)."""
    from tuner.trials import plan_spec

    def plan(spec: Any) -> dict[str, Any]:
        space = resolve_space(spec)  # once: validation and the plan share it
        _validate(spec, allowed_modules, max_trials, max_asha_rungs, space)
        planned = plan_spec(spec, nodes, check_fit=check_fit, space=space)
        return {"plan": planned.model_dump(mode="json")}

    return _answer(raw, yaml_body, plan)


def _validate(
    spec: Any,
    allowed_modules: list[str],
    max_trials: int | None,
    max_asha_rungs: int | None,
    space: dict[str, Domain] | None = None,
) -> list[str]:
    from tuner.trials import validate_spec

    return validate_spec(
        spec,
        allowed_modules=allowed_modules,
        import_user_code=False,
        max_trials=max_trials,
        max_asha_rungs=max_asha_rungs,
        space=space,
    )


def _answer(raw: bytes, yaml_body: bool, work: Callable[[Any], dict[str, Any]]) -> dict[str, Any]:
    """work(the parsed spec), or {"issues": [...]} for any problem ("status": 413 for a
    body nested too deep); never raises for a bad body."""
    from tuner.spec import parse_spec

    try:
        return work(parse_spec(parse_body(raw, yaml_body)))
    except NestingTooDeep as err:
        return {"issues": [i.model_dump(mode="json") for i in err.issues], "status": 413}
    except SpecError as err:
        return {"issues": [i.model_dump(mode="json") for i in err.issues]}
    except Exception as err:  # noqa: BLE001 - any other failure is still the spec's problem
        return one_issue("(spec)", f"cannot be checked: {type(err).__name__}: {str(err)[:300]}")


def warm_up() -> bool:
    """Imports RLlib in the worker ahead of the first request."""
    import tuner.trials._plan
    import tuner.trials._resources
    import tuner.trials._validate  # noqa: F401

    return True
