"""Durable store: experiments (sweeps), trials and per-iteration metrics (SQLAlchemy + Alembic)."""

from tuner.store._models import TRANSITIONS, ExperimentRecord
from tuner.store._store import Store
from tuner.store._text import ERROR_CHARS, last_lines
from tuner.views import MetricPoint

__all__ = [
    "ERROR_CHARS",
    "TRANSITIONS",
    "ExperimentRecord",
    "MetricPoint",
    "Store",
    "last_lines",
]
