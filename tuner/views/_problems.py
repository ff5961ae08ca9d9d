"""What is wrong with a request or a spec: `{loc, msg, value}` per problem."""

from __future__ import annotations

import json
from typing import Any

from pydantic import Field

from tuner.views._base import _View


class Problem(_View):
    """An error: `detail` says what and, for bad input, lists {loc, msg, value}."""

    detail: Any


class Issue(_View):
    """One problem with a spec or a request: where, what, and the value that was refused.

    Where: a dotted field path, or a parameter's name. Every 422 lists these;
    `tuner.spec.SpecError` carries them (as `SpecIssue`, this model).
    """

    loc: str = Field(..., description="Dotted field path, e.g. search.space.lr.")
    msg: str = Field(..., description="What is wrong.")
    value: Any = Field(None, description="The offending value.")

    def __str__(self) -> str:
        shown = json.dumps(self.value, default=str)
        if len(shown) > 120:
            shown = shown[:117] + "..."
        return f"{self.loc}: {self.msg} (got {shown})"


class Problems(_View):
    """Bad input (HTTP 422 and 413): every problem, by field."""

    detail: list[Issue]
