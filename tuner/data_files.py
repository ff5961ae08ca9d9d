"""Reading tuner's own data files (the YAML kept beside the code that reads it): each
file has a pydantic schema that refuses unknown keys, so a typo in a data file stops the
load with the file and the key named instead of being silently ignored.

    load_data_file(path, Schema)      -> Schema instance, or DataFileError
    DataFileError(path, [(loc, msg)])  -> "…/presets.yaml: Rainbow_DQN.warning: unknown key"
"""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from tuner.errors import TunerError

M = TypeVar("M", bound=BaseModel)


class DataFileError(TunerError, ValueError):
    """A data file of tuner's that its schema refuses; the message names the file and,
    for each problem, the key path (`PPO.performance_defaults`) and what is wrong."""

    def __init__(self, path: Path, problems: list[tuple[str, str]]) -> None:
        self.path = path
        self.problems = problems
        lines = [f"{loc}: {msg}" if loc else msg for loc, msg in problems]
        if len(lines) == 1:
            super().__init__(f"{path}: {lines[0]}")
        else:
            super().__init__(f"{path}: {len(lines)} problems" + "".join(f"\n  {x}" for x in lines))


def _problem(error: dict) -> tuple[str, str]:
    loc = ".".join(str(part) for part in error["loc"])
    if error["type"] == "extra_forbidden":
        return loc, "unknown key"
    if error["type"] == "missing":
        return loc, "missing (required)"
    return loc, f"{error['msg']} (got {error['input']!r:.80})"


def validate_data(path: Path, data: object, schema: type[M]) -> M:
    """`data` (what `path` holds, parsed) as `schema`; DataFileError naming `path` and
    each bad key where the schema refuses it."""
    try:
        return schema.model_validate(data)
    except ValidationError as err:
        raise DataFileError(path, [_problem(e) for e in err.errors()]) from None


def load_data_file(path: Path, schema: type[M]) -> M:
    """The YAML file at `path`, read as `schema` (see `validate_data`)."""
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        raise DataFileError(path, [("", f"not YAML: {err}")]) from None
    return validate_data(path, data, schema)


__all__ = ["DataFileError", "load_data_file", "validate_data"]
