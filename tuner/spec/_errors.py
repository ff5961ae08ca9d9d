"""A spec's problems: each names the field path and the value (`views.Issue`, the one
{loc, msg, value} shape every 422 lists)."""

from __future__ import annotations

import difflib
import json
from typing import Any

from pydantic import ValidationError

from tuner.errors import TunerError
from tuner.views import Issue as SpecIssue


def _json_safe(value: Any) -> Any:
    try:
        return json.loads(json.dumps(value, default=repr))
    except (ValueError, TypeError, RecursionError):
        return repr(value)[:200]


class SpecError(TunerError, ValueError):
    """A spec failed validation; `issues` names each field and value.

    Args:
        issues: Each issue: the field's path, what is wrong, the bad value.
    """

    def __init__(self, issues: list[SpecIssue]) -> None:
        self.issues = issues
        super().__init__("; ".join(str(i) for i in issues))

    @classmethod
    def one(cls, loc: str, msg: str, value: Any = None) -> SpecError:
        """A SpecError of one issue.

        Args:
            loc: The field's dotted path.
            msg: What is wrong.
            value: The bad value.

        Returns:
            The SpecError.
        """
        return cls([SpecIssue(loc=loc, msg=msg, value=value)])


def did_you_mean(name: str, known: Any) -> str:
    """A hint naming the closest of `known` names.

    The same name in another case first (`ppo` -> `PPO`, which difflib alone misses).

    Args:
        name: The unknown name.
        known: The known names.

    Returns:
        "; did you mean `x`?", or "" where none is close.
    """
    names = sorted(known)
    close = [k for k in names if k.lower() == name.lower()]
    close = close or difflib.get_close_matches(name, names, n=1, cutoff=0.75)
    return f"; did you mean `{close[0]}`?" if close else ""


def _fields_at(model: Any, path: tuple[Any, ...]) -> set[str]:
    """The field names of the (nested) pydantic model at `path` under `model`."""
    for part in path:
        field = getattr(model, "model_fields", {}).get(part)
        annotation = getattr(field, "annotation", None)
        candidates = [annotation, *getattr(annotation, "__args__", ())]
        model = next((c for c in candidates if hasattr(c, "model_fields")), None)
        if model is None:
            return set()
    return set(getattr(model, "model_fields", {}))


def issues_from_validation_error(err: ValidationError, model: Any = None) -> list[SpecIssue]:
    """Turns pydantic's errors into SpecIssues with dotted paths.

    An unknown field names the closest known one.

    Args:
        err: Pydantic's error.
        model: The validated class.

    Returns:
        The issues.
    """
    out = []
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"]) or "(spec)"
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden" and e["loc"]:
            msg = "unknown field" + did_you_mean(
                str(e["loc"][-1]), _fields_at(model, e["loc"][:-1])
            )
        out.append(SpecIssue(loc=loc, msg=msg, value=_json_safe(e.get("input"))))
    return out
