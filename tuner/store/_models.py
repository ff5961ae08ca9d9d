"""Tables (SQLAlchemy ORM), and the record of a sweep's service state.

Trials and metric points leave the store as the public views of tuner/views/
(converted once, from the rows); a sweep leaves it as an ExperimentRecord, the service's
own state (job id, attempts, stop flag, Tune path), which `ExperimentView.from_record`
turns into what users see."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from pydantic import BaseModel, ConfigDict
from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Dialect,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    TypeDecorator,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from tuner.mlflow_names import STAGE_SEARCH
from tuner.statuses import SweepStatus

# The sweep's state machine: every status change the service makes, and no other.
#   QUEUED   -> RUNNING (launched) | STOPPED (stopped before it ran)
#   RUNNING  -> STOPPING (stop asked) | QUEUED (driver died, relaunch) | an outcome
#   STOPPING -> STOPPED | FAILED | SUCCEEDED | PARTIAL (the driver's outcome, or the stop
#   enforced)
#   STOPPED, FAILED, PARTIAL -> QUEUED (resume); SUCCEEDED is final
_S = SweepStatus
TRANSITIONS: dict[SweepStatus, frozenset[SweepStatus]] = {
    _S.QUEUED: frozenset({_S.RUNNING, _S.STOPPED}),
    _S.RUNNING: frozenset(
        {_S.STOPPING, _S.QUEUED, _S.SUCCEEDED, _S.PARTIAL, _S.STOPPED, _S.FAILED}
    ),
    _S.STOPPING: frozenset({_S.STOPPED, _S.FAILED, _S.SUCCEEDED, _S.PARTIAL}),
    _S.STOPPED: frozenset({_S.QUEUED}),
    _S.FAILED: frozenset({_S.QUEUED}),
    _S.PARTIAL: frozenset({_S.QUEUED}),
    _S.SUCCEEDED: frozenset(),
}


def utcnow() -> datetime:
    """The current time, timezone-aware UTC."""
    return datetime.now(timezone.utc)


class UTCDateTime(TypeDecorator[datetime]):
    """A timestamp stored as UTC and always read back timezone-aware (SQLite drops the zone)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """Convert to UTC before writing (naive values are taken as UTC)."""
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=timezone.utc)
        return value.astimezone(timezone.utc)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """Attach UTC to values the database returns naive."""
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=timezone.utc)
        return value.astimezone(timezone.utc)


# --- tables ----------------------------------------------------------------------------------


class Base(DeclarativeBase):
    """Declarative base; its metadata is Alembic's target."""


class ExperimentRow(Base):
    """One sweep."""

    __tablename__ = "experiments"
    __table_args__ = (
        Index("ix_experiments_status_created_at", "status", "created_at"),
        Index("ix_experiments_created_at", "created_at"),
    )

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(String(255))
    status: Mapped[str] = mapped_column(String(16))
    spec: Mapped[dict[str, Any]] = mapped_column(JSON)
    warnings: Mapped[list[str]] = mapped_column(JSON)
    job_id: Mapped[str | None] = mapped_column(String(255))
    tune_path: Mapped[str | None] = mapped_column(Text)
    best: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True))
    confirmation: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON(none_as_null=True))
    pareto: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON(none_as_null=True))
    importance: Mapped[dict[str, float] | None] = mapped_column(JSON(none_as_null=True))
    importance_ped_anova: Mapped[dict[str, float] | None] = mapped_column(JSON(none_as_null=True))
    mlflow: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True))
    error: Mapped[str | None] = mapped_column(Text)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    launches: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    stop_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)


class TrialRow(Base):
    """One Tune trial of a sweep."""

    __tablename__ = "trials"

    experiment_id: Mapped[str] = mapped_column(
        String(32), ForeignKey("experiments.id", ondelete="CASCADE"), primary_key=True
    )
    trial_id: Mapped[str] = mapped_column(String(255), primary_key=True)
    status: Mapped[str] = mapped_column(String(32))
    config: Mapped[dict[str, Any]] = mapped_column(JSON)
    seed: Mapped[int | None] = mapped_column(BigInteger)
    iterations: Mapped[int] = mapped_column(Integer, default=0)
    env_steps: Mapped[int] = mapped_column(BigInteger, default=0)
    metric: Mapped[float | None] = mapped_column(Float)
    best_metric: Mapped[float | None] = mapped_column(Float)
    score: Mapped[float | None] = mapped_column(Float)
    train_score: Mapped[float | None] = mapped_column(Float)
    values: Mapped[dict[str, float | None] | None] = mapped_column(JSON(none_as_null=True))
    stage: Mapped[str] = mapped_column(String(16), server_default=STAGE_SEARCH)
    error: Mapped[str | None] = mapped_column(Text)
    node_id: Mapped[str | None] = mapped_column(String(255))
    node_ip: Mapped[str | None] = mapped_column(String(64))
    device: Mapped[str | None] = mapped_column(Text)
    cpu: Mapped[str | None] = mapped_column(Text)
    checkpoint: Mapped[str | None] = mapped_column(Text)
    mlflow_run_id: Mapped[str | None] = mapped_column(String(64))
    retries: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)


class MetricPointRow(Base):
    """The reported metrics of one trial at one training iteration."""

    __tablename__ = "metric_points"

    experiment_id: Mapped[str] = mapped_column(
        String(32), ForeignKey("experiments.id", ondelete="CASCADE"), primary_key=True
    )
    trial_id: Mapped[str] = mapped_column(String(255), primary_key=True)
    iteration: Mapped[int] = mapped_column(Integer, primary_key=True)
    env_steps: Mapped[int] = mapped_column(BigInteger, default=0)
    time_s: Mapped[float] = mapped_column(Float, default=0.0)
    values: Mapped[dict[str, float]] = mapped_column(JSON)


# --- records ---------------------------------------------------------------------------------


class ExperimentRecord(BaseModel):
    """A sweep's service state as the store returns it (not a public view)."""

    model_config = ConfigDict(from_attributes=True)

    id: str
    name: str
    status: SweepStatus
    spec: dict[str, Any]
    warnings: list[str]
    job_id: str | None = None
    tune_path: str | None = None
    best: dict[str, Any] | None = None
    confirmation: list[dict[str, Any]] | None = None
    pareto: list[dict[str, Any]] | None = None
    importance: dict[str, float] | None = None
    importance_ped_anova: dict[str, float] | None = None
    mlflow: dict[str, Any] | None = None
    error: str | None = None
    attempts: int = 0
    launches: int = 0
    stop_requested: bool = False
    created_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None
    updated_at: datetime
