"""Durable store: experiments (sweeps), trials and per-iteration metrics (SQLAlchemy + Alembic)."""

from tuner.store._models import (
    STATUSES,
    TERMINAL,
    ExperimentRecord,
    MetricPoint,
    TrialRecord,
)
from tuner.store._store import Store

__all__ = [
    "STATUSES",
    "TERMINAL",
    "ExperimentRecord",
    "MetricPoint",
    "Store",
    "TrialRecord",
]
