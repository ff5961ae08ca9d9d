"""The one validation pipeline (`check_source`).

Strict parsing of untrusted text, the spec's schema, the semantic checks that need RLlib
(its keys, code references, a dry build of the config and the env), then the fit and the
plan. CLI `validate` / `plan` / `run`, REST POST, the dry run and the web form all go
through it.

The API process imports this package for the pipeline's entry points, which it runs in
a worker process: `validate_spec` and `plan_spec`, which import RLlib, load on first use.
"""

from typing import Any

from tuner.validation._pipeline import (
    Checked,
    Checks,
    check_body,
    check_source,
    one_issue,
    parse_text,
    warm_up,
)


def __getattr__(name: str) -> Any:
    if name == "validate_spec":
        from tuner.validation._validate import validate_spec

        return validate_spec
    if name == "plan_spec":
        from tuner.validation._plan import plan_spec

        return plan_spec
    raise AttributeError(f"module 'tuner.validation' has no attribute {name!r}")


__all__ = [
    "Checked",
    "Checks",
    "check_body",
    "check_source",
    "one_issue",
    "parse_text",
    "plan_spec",
    "validate_spec",
    "warm_up",
]
