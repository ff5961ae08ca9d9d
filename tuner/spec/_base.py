"""What every section of a spec shares: strict models, and errors located at a field."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError


def field_errors(
    model: BaseModel, errors: list[tuple[tuple[str | int, ...], str, Any]]
) -> ValidationError:
    """A ValidationError locating each (loc, msg, value) at its field: raised in a model
    validator, pydantic nests the locs under the model's own (multi_agent.policies.1)."""
    return ValidationError.from_exception_data(
        type(model).__name__,
        [
            InitErrorDetails(
                type=PydanticCustomError("value_error", "{msg}", {"msg": msg}),
                loc=loc,
                input=value,
            )
            for loc, msg, value in errors
        ],
    )


class SpecModel(BaseModel):
    """A spec section: unknown keys, NaN and infinities are refused."""

    model_config = ConfigDict(extra="forbid", protected_namespaces=(), allow_inf_nan=False)
