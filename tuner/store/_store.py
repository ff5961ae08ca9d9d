"""The Store: short sessions over SQLAlchemy, schema migrated by Alembic on open
(tuner/store/_engine.py)."""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from sqlalchemy import (
    delete,
    func,
    insert,
    select,
    text,
    update,
)
from sqlalchemy.engine import make_url
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from tuner.errors import TunerError
from tuner.mlflow_names import STAGE_SEARCH
from tuner.statuses import ACTIVE, TERMINAL, SweepStatus, TrialStatus
from tuner.store._engine import migrate, open_engine
from tuner.store._models import (
    TRANSITIONS,
    ExperimentRecord,
    ExperimentRow,
    MetricPointRow,
    TrialRow,
    utcnow,
)
from tuner.store._text import last_lines
from tuner.views import MetricPoint, TrialView

T = TypeVar("T")
BULK = {"synchronize_session": False}  # plain UPDATE/DELETE: sessions are short, nothing to sync

WRITE_ATTEMPTS = 5  # retries of an insert-or-update that lost a race to another process

EXPERIMENT_FIELDS = set(ExperimentRecord.model_fields) - {"id", "created_at"}
# what a transition stamps itself: the status and its times
TRANSITION_FIELDS = EXPERIMENT_FIELDS - {"status", "updated_at", "started_at", "finished_at"}
ADMISSION_LOCK = 7531902469  # Postgres advisory lock: one sweep admitted at a time
TRIAL_FIELDS = {c.name for c in TrialRow.__table__.columns} - {
    "experiment_id",
    "trial_id",
    "updated_at",
}
# A sweep that ends with trials still pending or running was stopped, or failed, before
# they finished: they are PAUSED (a resume continues them), never left looking live.
UNFINISHED = (TrialStatus.PENDING.value, TrialStatus.RUNNING.value)
ENDED_UNFINISHED = {SweepStatus.STOPPED, SweepStatus.FAILED}
NOT_FINISHED_NOTE = "not finished: the sweep FAILED before this trial ended; a resume continues it"
TRIAL_DEFAULTS: dict[str, Any] = {
    "status": TrialStatus.PENDING.value,
    "stage": STAGE_SEARCH,
    "config": {},
    "iterations": 0,
    "env_steps": 0,
    "retries": 0,
}


def _finite(value: float | None) -> float | None:
    """A float, or None for None/NaN/inf."""
    return float(value) if value is not None and math.isfinite(value) else None


class Store:
    """Experiments, trials and metric history in any SQLAlchemy database (SQLite by default).

    Args:
        url: The database's SQLAlchemy URL (a SQLite file's folder is created if missing).
    """

    def __init__(self, url: str) -> None:
        """Connect to `url` and migrate its schema to the newest revision."""
        self.url = make_url(url)
        self.engine = open_engine(self.url)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        migrate(self.engine, self.url)

    def close(self) -> None:
        """Close every pooled connection."""
        self.engine.dispose()

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

    # --- experiments -----------------------------------------------------------------------

    def create_experiment(
        self,
        *,
        name: str,
        spec: dict[str, Any],
        warnings: list[str],
        max_active: int | None = None,
    ) -> ExperimentRecord | None:
        """Record a new sweep, QUEUED.

        With `max_active`: None, and nothing stored, when that many sweeps are already
        QUEUED, RUNNING or STOPPING. The count and the insert are one transaction that
        holds the database's write lock (SQLite: the INSERT takes it before the count;
        Postgres: an advisory lock first), so requests racing each other, from any
        process, never store more than `max_active`.

        Args:
            name: The sweep's name.
            spec: The validated spec, as JSON data.
            warnings: The validation's warnings, kept with the sweep.
            max_active: At most this many sweeps QUEUED, RUNNING or STOPPING; None: no
                limit.

        Returns:
            The new sweep, or None when `max_active` sweeps are already active.
        """
        now = utcnow()
        row = ExperimentRow(
            id=uuid.uuid4().hex[:12],
            name=name,
            status=SweepStatus.QUEUED.value,
            spec=spec,
            warnings=list(warnings),
            attempts=0,
            launches=0,
            stop_requested=False,
            created_at=now,
            updated_at=now,
        )
        try:
            with self._sessions.begin() as session:
                if max_active is not None:
                    _lock_admissions(session)
                session.add(row)
                session.flush()  # the INSERT: on SQLite it holds the write lock from here
                if max_active is not None:
                    active = _words(ACTIVE)
                    counting = select(func.count()).where(ExperimentRow.status.in_(active))
                    if (session.scalar(counting) or 0) > max_active:
                        raise _OverLimit  # rolls the insert back
        except _OverLimit:
            return None
        return ExperimentRecord.model_validate(row)

    def get_experiment(self, experiment_id: str) -> ExperimentRecord | None:
        """The sweep with this id, or None.

        Args:
            experiment_id: The sweep's id.

        Returns:
            The sweep, or None if there is none with this id.
        """
        with self._sessions() as session:
            row = session.get(ExperimentRow, experiment_id)
            return ExperimentRecord.model_validate(row) if row else None

    def list_experiments(
        self, *, status: str | None = None, limit: int = 50, offset: int = 0
    ) -> tuple[list[ExperimentRecord], int]:
        """One page of sweeps, newest first, and how many there are in all.

        Args:
            status: Only sweeps with this status; None: every sweep. ValueError outside
                SweepStatus.
            limit: At most this many sweeps on the page.
            offset: How many sweeps (newest first) the page skips.

        Returns:
            The page's sweeps and the number of sweeps (with `status`) in all.
        """
        query = select(ExperimentRow)
        counting = select(func.count()).select_from(ExperimentRow)
        if status is not None:
            status = _check_status(status)
            query = query.where(ExperimentRow.status == status)
            counting = counting.where(ExperimentRow.status == status)
        query = query.order_by(ExperimentRow.created_at.desc(), ExperimentRow.id.desc())
        with self._sessions() as session:
            rows = session.scalars(query.limit(limit).offset(offset)).all()
            total = session.scalar(counting) or 0
        return [ExperimentRecord.model_validate(r) for r in rows], total

    def update_experiment(self, experiment_id: str, **fields: Any) -> ExperimentRecord | None:
        """Set the given fields (and updated_at); the updated sweep, or None if it is gone.

        Args:
            experiment_id: The sweep's id.
            **fields: The ExperimentRecord fields to set (not `id` or `created_at`); an
                error is kept as its last lines.

        Returns:
            The updated sweep, or None if it is gone.

        Raises:
            TypeError: A field that is not an experiment field.
            ValueError: A status outside SweepStatus.
        """
        unknown = set(fields) - EXPERIMENT_FIELDS
        if unknown:
            raise TypeError(f"not experiment fields: {sorted(unknown)}")
        if "status" in fields:
            fields["status"] = _check_status(fields["status"])
        _shorten_error(fields)
        fields.setdefault("updated_at", utcnow())
        with self._sessions.begin() as session:
            statement = update(ExperimentRow).where(ExperimentRow.id == experiment_id)
            session.execute(statement.values(**fields), execution_options=BULK)
            row = session.get(ExperimentRow, experiment_id)
            return ExperimentRecord.model_validate(row) if row else None

    def transition(
        self, experiment_id: str, to: str, *, allowed_from: set[str], **fields: Any
    ) -> bool:
        """Atomically move a sweep to status `to` (compare-and-set); whether it moved.

        It moves if its status is in `allowed_from` and the state machine (TRANSITIONS)
        has that change. `fields` (stop_requested, attempts, error, ...) are written by
        the same guarded UPDATE: only if the sweep moved. A move to STOPPED or FAILED
        also marks the sweep's trials still PENDING or RUNNING as PAUSED (FAILED: with a
        note in their error), in the same transaction.

        Args:
            experiment_id: The sweep's id.
            to: The status to move to.
            allowed_from: The statuses it may move from.
            **fields: Other fields the move writes (not the status or its times).

        Returns:
            Whether the sweep moved.

        Raises:
            ValueError: `to` is outside SweepStatus, or the state machine allows the move
                from none of `allowed_from` (a programming error).
            TypeError: A field a transition may not set.
        """
        to = SweepStatus(_check_status(to))
        unknown = set(fields) - TRANSITION_FIELDS
        if unknown:
            raise TypeError(f"not fields a transition may set: {sorted(unknown)}")
        allowed_from = {s for s in allowed_from if to in TRANSITIONS.get(s, ())}
        if not allowed_from:
            raise ValueError(f"no transition to {to} from those statuses in the state machine")
        _shorten_error(fields)
        now = utcnow()
        values: dict[str, Any] = {**fields, "status": to.value, "updated_at": now}
        if to == SweepStatus.RUNNING:
            values["started_at"] = func.coalesce(ExperimentRow.started_at, now)
        # A terminal status stamps finished_at; leaving one (resume) clears it.
        values["finished_at"] = now if to in TERMINAL else None
        statement = (
            update(ExperimentRow)
            .where(
                ExperimentRow.id == experiment_id, ExperimentRow.status.in_(_words(allowed_from))
            )
            .values(**values)
        )
        with self._sessions.begin() as session:
            moved = session.execute(statement, execution_options=BULK).rowcount == 1
            if moved and to in ENDED_UNFINISHED:
                _end_unfinished_trials(session, experiment_id, to, now)
            return moved

    def queued_in_order(self) -> list[ExperimentRecord]:
        """QUEUED sweeps, oldest first (submission order).

        Returns:
            The QUEUED sweeps, in submission order.
        """
        query = (
            select(ExperimentRow)
            .where(ExperimentRow.status == SweepStatus.QUEUED.value)
            .order_by(ExperimentRow.created_at, ExperimentRow.id)
        )
        with self._sessions() as session:
            return [ExperimentRecord.model_validate(r) for r in session.scalars(query)]

    def count_by_status(self, statuses: Iterable[str]) -> int:
        """How many sweeps have one of these statuses.

        Args:
            statuses: The statuses to count.

        Returns:
            The number of sweeps with one of them.
        """
        query = select(func.count()).where(ExperimentRow.status.in_(_words(statuses)))
        with self._sessions() as session:
            return session.scalar(query) or 0

    def delete_experiment(
        self, experiment_id: str, *, allowed_from: Iterable[str] | None = None
    ) -> bool:
        """Delete a sweep with its trials and metric points; whether it was deleted.

        Args:
            experiment_id: The sweep's id.
            allowed_from: Delete only while its status is one of those (atomically: a
                concurrent status change waits for this transaction, then finds no row);
                None: whatever its status.

        Returns:
            Whether it was deleted.
        """
        with self._sessions.begin() as session:
            if allowed_from is not None:
                claim = (
                    update(ExperimentRow)
                    .where(
                        ExperimentRow.id == experiment_id,
                        ExperimentRow.status.in_(_words(allowed_from)),
                    )
                    .values(updated_at=utcnow())
                )
                if session.execute(claim, execution_options=BULK).rowcount != 1:
                    return False
            for table in (MetricPointRow, TrialRow):
                session.execute(
                    delete(table).where(table.experiment_id == experiment_id),
                    execution_options=BULK,
                )
            gone = delete(ExperimentRow).where(ExperimentRow.id == experiment_id)
            return session.execute(gone, execution_options=BULK).rowcount == 1

    # --- trials ----------------------------------------------------------------------------

    def upsert_trial(self, experiment_id: str, trial_id: str, **fields: Any) -> None:
        """Insert or update a trial with the given fields (safe when processes race).

        Args:
            experiment_id: The sweep's id.
            trial_id: The trial's id within the sweep.
            **fields: The trial's columns to set; a new trial gets defaults for the
                rest (PENDING, the search stage, no iterations). A metric, best_metric,
                score or train_score that is not finite is stored as None, an error as
                its last lines.

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
        _shorten_error(fields)
        fields["updated_at"] = utcnow()
        where = (TrialRow.experiment_id == experiment_id) & (TrialRow.trial_id == trial_id)

        def work(session: Session) -> None:
            changed = update(TrialRow).where(where).values(**fields)
            if session.execute(changed, execution_options=BULK).rowcount:
                return
            row = {**TRIAL_DEFAULTS, **fields, "experiment_id": experiment_id}
            session.execute(insert(TrialRow).values(**row, trial_id=trial_id))

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


def _shorten_error(fields: dict[str, Any]) -> None:
    """An error among `fields` as the store keeps it: its last lines (tuner.store.last_lines)."""
    if isinstance(fields.get("error"), str):
        fields["error"] = last_lines(fields["error"])


def _end_unfinished_trials(
    session: Session, experiment_id: str, outcome: SweepStatus, now: Any
) -> None:
    """A sweep that ended STOPPED or FAILED: its trials still PENDING or RUNNING are
    PAUSED (a resume continues them); after a failure their error says why they stopped
    (below the error they had, if any)."""
    values: dict[str, Any] = {"status": TrialStatus.PAUSED.value, "updated_at": now}
    if outcome == SweepStatus.FAILED:
        before = func.coalesce(TrialRow.error + "\n", "")
        values["error"] = before + NOT_FINISHED_NOTE
    statement = (
        update(TrialRow)
        .where(TrialRow.experiment_id == experiment_id, TrialRow.status.in_(UNFINISHED))
        .values(**values)
    )
    session.execute(statement, execution_options=BULK)


def _check_status(status: str) -> str:
    """A sweep's status as the word the store keeps; ValueError outside SweepStatus."""
    try:
        return SweepStatus(status).value
    except ValueError:
        known = ", ".join(SweepStatus)
        raise ValueError(f"unknown experiment status {status!r}; expected one of {known}") from None


def _words(statuses: Iterable[str]) -> list[str]:
    """Statuses as the plain words the store keeps (bound parameters stay plain `str`)."""
    return sorted(str(s) for s in statuses)


def _chunks(items: list[int], size: int) -> Iterable[list[int]]:
    """Consecutive slices of at most `size` items."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


class _OverLimit(TunerError):
    """Raised inside create_experiment's transaction to roll its insert back."""


def _lock_admissions(session: Session) -> None:
    """Postgres: serialize admissions until the transaction ends (an advisory lock; at
    READ COMMITTED two inserts would each count before seeing the other's row). SQLite
    needs none: its INSERT takes the database's one write lock before the count."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text(f"SELECT pg_advisory_xact_lock({ADMISSION_LOCK})"))
