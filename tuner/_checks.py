"""Request bodies parsed and specs validated in a worker process, so the API process
never imports RLlib and a pathological body cannot stall or crash its event loop."""

from __future__ import annotations

import json
from typing import Any

import yaml


def _issue(loc: str, msg: str, value: Any = None) -> dict[str, Any]:
    return {"issues": [{"loc": loc, "msg": msg, "value": value}]}


def parse_body(raw: bytes, yaml_body: bool) -> Any:
    """The body as data; YAML aliases are refused (a few bytes can expand to gigabytes)."""
    text = raw.decode("utf-8")
    if not yaml_body:
        return json.loads(text)
    if any(isinstance(t, yaml.AliasToken) for t in yaml.scan(text)):
        raise ValueError("YAML aliases (*name) are not accepted")
    return yaml.safe_load(text)


def check_body(
    raw: bytes,
    yaml_body: bool,
    allowed_env_modules: list[str],
    nodes: list[dict[str, float]] | None = None,
) -> dict[str, Any]:
    """{"spec": validated spec JSON, "warnings": [...]} or {"issues": [{loc, msg, value}]}.

    With `nodes` (each alive node's total resources), a spec whose one trial can never
    be placed on them is refused too."""
    from tuner.spec import SpecError, parse_spec
    from tuner.trials import check_fits, validate_spec

    kind = "YAML" if yaml_body else "JSON"
    try:
        data = parse_body(raw, yaml_body)
    except (ValueError, yaml.YAMLError, RecursionError) as err:
        return _issue("(body)", f"not valid {kind}: {str(err)[:300]}")
    try:
        spec = parse_spec(data)
        warnings = validate_spec(spec, allowed_env_modules=allowed_env_modules)
        if nodes:
            check_fits(spec, nodes)
    except SpecError as err:
        return {"issues": [i.model_dump(mode="json") for i in err.issues]}
    except Exception as err:  # noqa: BLE001 - any other failure is still the spec's problem
        return _issue("(spec)", f"cannot be checked: {type(err).__name__}: {str(err)[:300]}")
    return {"spec": spec.model_dump(mode="json"), "warnings": warnings}


def warm_up() -> bool:
    """Imports RLlib in the worker ahead of the first request."""
    import tuner.trials  # noqa: F401

    return True
