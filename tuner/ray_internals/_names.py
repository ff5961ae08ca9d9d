"""The list of Ray's private names tuner uses: its schema and its loader (the list is
ray_internals.yaml, beside this module)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel

from tuner.data_files import load_data_file


class PrivateName(BaseModel):
    """A private name we use: where it lives ("module:Class" or "module:function"),
    the name, what kind of use (attribute, method we override, method we call, keyword,
    config key, copied code) and why. One entry of ray_internals.yaml."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    owner: str = Field(pattern=r"^[\w.]+:[\w.]+$")
    name: str = Field(pattern=r"^_\w+$")
    kind: Literal[
        "attribute", "method we override", "method we call", "keyword", "config key", "copied code"
    ]
    why: str = Field(min_length=1)


class PrivateNamesFile(RootModel[list[PrivateName]]):
    """ray_internals.yaml: every private name tuner uses."""

    model_config = ConfigDict(frozen=True)


def read_private_names(
    path: Path = Path(__file__).with_name("ray_internals.yaml"),
) -> tuple[PrivateName, ...]:
    """The private names listed in `path` (the list kept as data beside this module)."""
    return tuple(load_data_file(path, PrivateNamesFile).root)


PRIVATE_NAMES: tuple[PrivateName, ...] = read_private_names()
