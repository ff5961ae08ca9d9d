"""Base settings per env (env_settings.yaml): what rl-zoo3's tuner keeps from its yml
files while it samples, each with its source; they apply where a spec sets none."""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, RootModel

from tuner.data_files import load_data_file

_FILE = Path(__file__).with_name("env_settings.yaml")
_VERSION = re.compile(r"-v\d+$")


class BaseSettings(BaseModel):
    """One env's base settings for one algorithm."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    normalize_observations: bool | None = None
    num_envs_per_env_runner: int | None = Field(None, ge=1)
    source: str = Field("", description="rl_zoo3 hyperparams file and entry")

    def settings(self) -> dict[str, Any]:
        """The settings it sets, without its source.

        Returns:
            Each setting it sets, by RLlib's name.
        """
        return self.model_dump(exclude={"source"}, exclude_none=True)


class EnvSettingsFile(RootModel[dict[str, dict[str, BaseSettings]]]):
    """env_settings.yaml: env name (no version) -> base algorithm -> its base settings."""

    model_config = ConfigDict(frozen=True)


@functools.cache
def _table(path: Path = _FILE) -> dict[str, dict[str, BaseSettings]]:
    return load_data_file(path, EnvSettingsFile).root


def env_key(env: str | None) -> str | None:
    """The key of a gymnasium id in the table.

    Its name without namespace or version (`CartPole-v1` -> `CartPole`).

    Args:
        env: The spec's env.

    Returns:
        The key; None for an import-path env or none.
    """
    if not env or ":" in env:
        return None
    return _VERSION.sub("", env.rsplit("/", 1)[-1])


def base_settings(env: str | None, algorithm: str) -> BaseSettings:
    """The base settings of `env` for a base algorithm (PPO, APPO, ...).

    Args:
        env: The spec's env.
        algorithm: A base algorithm's name.

    Returns:
        Its base settings; none set where the table has no entry.
    """
    key = env_key(env)
    return _table().get(key or "", {}).get(algorithm, BaseSettings())


def env_settings_table() -> dict[str, dict[str, BaseSettings]]:
    """The whole table, as kept.

    Returns:
        Env key -> base algorithm -> its base settings.
    """
    return dict(_table())
