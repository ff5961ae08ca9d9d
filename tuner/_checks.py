"""Spec validation run in a worker process, so the API process never imports Ray."""

from __future__ import annotations

from typing import Any


def check_spec(data: Any) -> dict[str, Any]:
    """{"spec": validated spec JSON, "warnings": [...]} or {"issues": [{loc, msg, value}]}."""
    from tuner.spec import SpecError, parse_spec
    from tuner.trials import validate_spec

    try:
        spec = parse_spec(data)
        warnings = validate_spec(spec)
    except SpecError as err:
        return {"issues": [i.model_dump(mode="json") for i in err.issues]}
    return {"spec": spec.model_dump(mode="json"), "warnings": warnings}


def warm_up() -> bool:
    """Imports RLlib in the worker ahead of the first request."""
    import tuner.trials  # noqa: F401

    return True
