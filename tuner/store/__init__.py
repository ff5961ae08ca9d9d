"""Durable store: experiments (sweeps), trials and per-iteration metrics (SQLAlchemy + Alembic)."""

from tuner.store._models import TRANSITIONS, ExperimentRecord
from tuner.store._store import Store
from tuner.views import MetricPoint

__all__ = [
    "TRANSITIONS",
    "ExperimentRecord",
    "MetricPoint",
    "Store",
]
