"""A spec from plain data or a file: strict parsing (no YAML tags or aliases, bounded
depth and numbers), then the schema."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from tuner.spec._errors import SpecError, SpecIssue, issues_from_validation_error
from tuner.spec._models import ExperimentSpec
from tuner.spec._safe_input import check_data, load_json_strict, load_yaml_strict


def parse_spec(data: Any) -> ExperimentSpec:
    """Validates a mapping as an ExperimentSpec.

    Args:
        data: The parsed spec.

    Returns:
        The spec.

    Raises:
        SpecError: Naming each field.
    """
    if not isinstance(data, dict):
        raise SpecError(
            [
                SpecIssue(
                    loc="(spec)", msg="a spec is a mapping of fields", value=type(data).__name__
                )
            ]
        )
    try:
        return ExperimentSpec.model_validate(data)
    except ValidationError as err:
        raise SpecError(issues_from_validation_error(err, ExperimentSpec)) from None


def load_spec(path: str | Path) -> ExperimentSpec:
    """Loads a spec from a YAML or JSON file.

    Args:
        path: The file (.json: JSON; else YAML).

    Returns:
        The spec.

    Raises:
        SpecError: On any problem (the file, its text, its fields).
    """
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as err:
        raise SpecError(
            [SpecIssue(loc="(file)", msg=err.strerror or str(err), value=str(p))]
        ) from None
    data = load_json_strict(text) if p.suffix == ".json" else load_yaml_strict(text)
    issues = check_data(data)
    if issues:
        raise SpecError(issues)
    return parse_spec(data)


def json_schema() -> dict[str, Any]:
    """JSON Schema of the spec (the same one the REST API publishes).

    Returns:
        The schema.
    """
    return ExperimentSpec.model_json_schema()
