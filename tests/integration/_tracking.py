"""MLflow for in-process sweeps: a SQLite store in the test's directory, and its runs."""

from __future__ import annotations

from pathlib import Path

from mlflow.tracking import MlflowClient

from tuner.tracking import TrackingConfig


def sqlite_tracking(tmp_path: Path) -> TrackingConfig:
    """Tracking into tmp_path/mlflow.db, artifacts under tmp_path/a."""
    return TrackingConfig(
        tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}",
        artifact_location=(tmp_path / "a").as_uri(),
    )


def child_runs(tracking: TrackingConfig, summary) -> list:
    """The sweep's trial runs (children of its parent run)."""
    client = MlflowClient(tracking_uri=tracking.tracking_uri)
    return [
        r
        for r in client.search_runs([summary.mlflow.experiment_id])
        if "mlflow.parentRunId" in r.data.tags
    ]
