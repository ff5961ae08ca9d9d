"""A spec's problems: each names the field path and the value (`views.Issue`, the one
{loc, msg, value} shape every 422 lists)."""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from tuner.views import Issue as SpecIssue


def _json_safe(value: Any) -> Any:
    try:
        return json.loads(json.dumps(value, default=repr))
    except (ValueError, TypeError, RecursionError):
        return repr(value)[:200]


class SpecError(ValueError):
    """A spec failed validation; `issues` names each field and value."""

    def __init__(self, issues: list[SpecIssue]) -> None:
        self.issues = issues
        super().__init__("; ".join(str(i) for i in issues))

    @classmethod
    def one(cls, loc: str, msg: str, value: Any = None) -> SpecError:
        """A SpecError of one issue."""
        return cls([SpecIssue(loc=loc, msg=msg, value=value)])


def issues_from_validation_error(err: ValidationError) -> list[SpecIssue]:
    """Turns pydantic's errors into SpecIssues with dotted paths."""
    out = []
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"]) or "(spec)"
        msg = e["msg"].removeprefix("Value error, ")
        out.append(SpecIssue(loc=loc, msg=msg, value=_json_safe(e.get("input"))))
    return out
