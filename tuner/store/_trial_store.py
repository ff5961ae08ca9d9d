"""The store's trials and their metric history; Store (_store.py) adds the sweeps."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from tuner.mlflow_names import STAGE_SEARCH
from tuner.statuses import SweepStatus, TrialStatus
from tuner.store._models import ExperimentRow, MetricPointRow, TrialRow, utcnow
from tuner.store._text import last_lines
from tuner.views import MetricPoint, TrialView

T = TypeVar("T")

BULK = {"synchronize_session": False}  # plain UPDATE/DELETE: sessions are short, nothing to sync
WRITE_ATTEMPTS = 5  # retries of an insert-or-update that lost a race to another process
TRIAL_FIELDS = {c.name for c in TrialRow.__table__.columns} - {
    "experiment_id",
    "trial_id",
    "updated_at",
}
TRIAL_DEFAULTS: dict[str, Any] = {
    "status": TrialStatus.PENDING.value,
    "stage": STAGE_SEARCH,
    "config": {},
    "iterations": 0,
    "env_steps": 0,
    "retries": 0,
}
# A sweep that ends with trials still pending or running was stopped, or failed, before
# they finished: they are PAUSED (a resume continues them), never left looking live.
UNFINISHED = (TrialStatus.PENDING.value, TrialStatus.RUNNING.value)
ENDED_UNFINISHED = (SweepStatus.STOPPED.value, SweepStatus.FAILED.value)
NOT_FINISHED_NOTE = "not finished: the sweep FAILED before this trial ended; a resume continues it"


def _finite(value: float | None) -> float | None:
    """A float, or None for None/NaN/inf."""
    return float(value) if value is not None and math.isfinite(value) else None


def _chunks(items: list[int], size: int) -> Iterable[list[int]]:
    """Consecutive slices of at most `size` items."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


def shorten_error(fields: dict[str, Any]) -> None:
    """An error among `fields` as the store keeps it: its last lines (tuner.store.last_lines)."""
    if isinstance(fields.get("error"), str):
        fields["error"] = last_lines(fields["error"])


def end_unfinished_trials(
    session: Session, experiment_id: str, *, outcome: str | None = None, trial_id: str | None = None
) -> None:
    """A sweep that ended STOPPED or FAILED: its trials (or the one `trial_id`) still
    PENDING or RUNNING are PAUSED (a resume continues them); after a failure their error
    says why they stopped (below the error they had, if any).

    Args:
        session: The open transaction.
        experiment_id: The sweep's id.
        outcome: How the sweep ended; None: read from the store (nothing changes unless
            it is STOPPED or FAILED).
        trial_id: Only this trial; None: every trial of the sweep.
    """
    if outcome is None:
        sweep = select(ExperimentRow.status).where(ExperimentRow.id == experiment_id)
        outcome = session.scalar(sweep)
    if outcome not in ENDED_UNFINISHED:
        return
    values: dict[str, Any] = {"status": TrialStatus.PAUSED.value, "updated_at": utcnow()}
    if outcome == SweepStatus.FAILED.value:
        before = func.coalesce(TrialRow.error + "\n", "")
        values["error"] = before + NOT_FINISHED_NOTE
    where = [TrialRow.experiment_id == experiment_id, TrialRow.status.in_(UNFINISHED)]
    if trial_id is not None:
        where.append(TrialRow.trial_id == trial_id)
    session.execute(update(TrialRow).where(*where).values(**values), execution_options=BULK)


class TrialStore:
    """A sweep's trials and their metric history, in short sessions (Store's base)."""

    _sessions: sessionmaker[Session]

    def _write(self, work: Callable[[Session], T]) -> T:
        """Run `work` in its own transaction, again if it lost an insert race (IntegrityError)."""
        for _ in range(WRITE_ATTEMPTS - 1):
            try:
                with self._sessions.begin() as session:
                    return work(session)
            except IntegrityError:
                continue  # another process inserted the same key first: redo as an update
        with self._sessions.begin() as session:
            return work(session)

    # --- trials ----------------------------------------------------------------------------

    def upsert_trial(self, experiment_id: str, trial_id: str, **fields: Any) -> None:
        """Insert or update a trial with the given fields (safe when processes race).

        Args:
            experiment_id: The sweep's id.
            trial_id: The trial's id within the sweep.
            **fields: The trial's columns to set; a new trial gets defaults for the
                rest (PENDING, the search stage, no iterations). A metric, best_metric,
                score or train_score that is not finite is stored as None, an error as
                its last lines. A trial left PENDING or RUNNING by a write that comes
                after its sweep ended STOPPED or FAILED (a driver's last result, written
                while its job was being stopped) is PAUSED as the end paused the others:
                an ended sweep has no live trial.

        Raises:
            TypeError: A field that is not a trial field.
            ValueError: A status outside TrialStatus.
        """
        unknown = set(fields) - TRIAL_FIELDS
        if unknown:
            raise TypeError(f"not trial fields: {sorted(unknown)}")
        if "status" in fields:
            fields["status"] = TrialStatus(fields["status"]).value  # ValueError if unknown
        for key in ("metric", "best_metric", "score", "train_score"):
            if key in fields:
                fields[key] = _finite(fields[key])
        shorten_error(fields)
        fields["updated_at"] = utcnow()
        where = (TrialRow.experiment_id == experiment_id) & (TrialRow.trial_id == trial_id)

        def work(session: Session) -> None:
            changed = update(TrialRow).where(where).values(**fields)
            if session.execute(changed, execution_options=BULK).rowcount:
                live = fields.get("status") in UNFINISHED
            else:
                row = {**TRIAL_DEFAULTS, **fields, "experiment_id": experiment_id}
                session.execute(insert(TrialRow).values(**row, trial_id=trial_id))
                live = row["status"] in UNFINISHED
            if live:
                # read after the write, in its transaction: on SQLite the write holds the
                # database's write lock, on Postgres a transition that ends the sweep
                # either committed before this read (seen here) or pauses this row after
                end_unfinished_trials(session, experiment_id, trial_id=trial_id)

        self._write(work)

    def list_trials(self, experiment_id: str) -> list[TrialView]:
        """A sweep's trials, ordered by trial id.

        Args:
            experiment_id: The sweep's id.

        Returns:
            Its trials, ordered by trial id.
        """
        query = (
            select(TrialRow)
            .where(TrialRow.experiment_id == experiment_id)
            .order_by(TrialRow.trial_id)
        )
        with self._sessions() as session:
            return [TrialView.model_validate(r) for r in session.scalars(query)]

    def get_trial(self, experiment_id: str, trial_id: str) -> TrialView | None:
        """One trial, or None.

        Args:
            experiment_id: The sweep's id.
            trial_id: The trial's id within the sweep.

        Returns:
            The trial, or None if there is none.
        """
        with self._sessions() as session:
            row = session.get(TrialRow, (experiment_id, trial_id))
            return TrialView.model_validate(row) if row else None

    def trial_counts(self, experiment_id: str) -> dict[str, int]:
        """How many of a sweep's trials are in each status.

        Args:
            experiment_id: The sweep's id.

        Returns:
            Status -> number of trials, for the statuses its trials have.
        """
        query = (
            select(TrialRow.status, func.count())
            .where(TrialRow.experiment_id == experiment_id)
            .group_by(TrialRow.status)
        )
        with self._sessions() as session:
            return {status: count for status, count in session.execute(query).all()}

    # --- metric history --------------------------------------------------------------------

    def add_metric_points(
        self, experiment_id: str, trial_id: str, points: list[MetricPoint]
    ) -> None:
        """Record iterations of a trial; an iteration reported again replaces the old row.

        Args:
            experiment_id: The sweep's id.
            trial_id: The trial's id within the sweep.
            points: The iterations' metric points; within one call the last point of an
                iteration wins. Non-finite values are dropped.
        """
        latest = {p.iteration: p for p in points}  # within one call, the last one wins too
        if not latest:
            return
        rows = [
            {
                "experiment_id": experiment_id,
                "trial_id": trial_id,
                "iteration": p.iteration,
                "env_steps": p.env_steps,
                "time_s": p.time_s,
                "values": {k: v for k, v in p.values.items() if math.isfinite(v)},
            }
            for p in latest.values()
        ]
        same_trial = (MetricPointRow.experiment_id == experiment_id) & (
            MetricPointRow.trial_id == trial_id
        )

        def work(session: Session) -> None:
            for chunk in _chunks(sorted(latest), 500):
                stale = delete(MetricPointRow).where(
                    same_trial, MetricPointRow.iteration.in_(chunk)
                )
                session.execute(stale, execution_options=BULK)
            session.execute(insert(MetricPointRow), rows)

        self._write(work)

    def metric_history(
        self, experiment_id: str, trial_id: str, *, keys: list[str] | None = None
    ) -> list[MetricPoint]:
        """A trial's metric points by iteration; `keys` keeps only those metric values.

        Args:
            experiment_id: The sweep's id.
            trial_id: The trial's id within the sweep.
            keys: Keep only these metric values in each point; None: all of them.

        Returns:
            The trial's metric points, ordered by iteration.
        """
        query = (
            select(MetricPointRow)
            .where(MetricPointRow.experiment_id == experiment_id)
            .where(MetricPointRow.trial_id == trial_id)
            .order_by(MetricPointRow.iteration)
        )
        with self._sessions() as session:
            points = [MetricPoint.model_validate(r) for r in session.scalars(query)]
        if keys is not None:
            for point in points:
                point.values = {k: point.values[k] for k in keys if k in point.values}
        return points

    def metric_series(self, experiment_id: str, key: str) -> dict[str, list[tuple[int, float]]]:
        """Every trial's curve of one metric: trial_id -> [(env_steps, value), ...].

        Args:
            experiment_id: The sweep's id.
            key: The metric's name.

        Returns:
            trial_id -> [(env_steps, value), ...] by iteration, for every trial with
            metric points (empty where none has `key`).
        """
        query = (
            select(MetricPointRow.trial_id, MetricPointRow.env_steps, MetricPointRow.values)
            .where(MetricPointRow.experiment_id == experiment_id)
            .order_by(MetricPointRow.trial_id, MetricPointRow.iteration)
        )
        series: dict[str, list[tuple[int, float]]] = {}
        with self._sessions() as session:
            for trial_id, env_steps, values in session.execute(query):
                curve = series.setdefault(trial_id, [])
                if key in values:
                    curve.append((env_steps, values[key]))
        return series
