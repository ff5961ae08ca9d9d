"""Settings from the environment (prefix TUNER_) with embedded defaults."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Every knob of the service; `TUNER_<NAME>` sets one."""

    model_config = SettingsConfigDict(env_prefix="TUNER_", extra="ignore")

    data_dir: Path = Field(
        Path.home() / ".tuner",
        description="Where everything lives by "
        "default: Tune storage, the SQLite store, MLflow's db and artifacts.",
    )
    ray_address: str | None = Field(
        None, description="Address of an existing Ray cluster; empty: a local Ray started for you."
    )
    storage_path: str | None = Field(
        None,
        description="Tune trial storage (a shared path or "
        "an object-store URI); default <data_dir>/ray_results.",
    )
    mlflow_tracking_uri: str | None = Field(
        None, description="MLflow server URL or DB URI; default sqlite:////<data_dir>/mlflow.db."
    )

    @property
    def data_path(self) -> Path:
        """The data dir as an absolute path."""
        return self.data_dir.expanduser().absolute()

    @property
    def tune_storage(self) -> Path:
        """Tune's storage path as an absolute path."""
        if self.storage_path:
            return Path(self.storage_path).expanduser().absolute()
        return self.data_path / "ray_results"


@cache
def get_settings() -> Settings:
    """The process's settings (read once)."""
    return Settings()
