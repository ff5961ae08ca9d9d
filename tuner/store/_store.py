"""The Store: short sessions over SQLAlchemy, schema migrated by Alembic on open
(tuner/store/_engine.py)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from sqlalchemy import (
    delete,
    func,
    select,
    text,
    update,
)
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

from tuner.errors import TunerError
from tuner.statuses import ACTIVE, TERMINAL, SweepStatus
from tuner.store._engine import migrate, open_engine
from tuner.store._models import (
    TRANSITIONS,
    ExperimentRecord,
    ExperimentRow,
    MetricPointRow,
    TrialRow,
    utcnow,
)
from tuner.store._trial_store import (
    BULK,
    ENDED_UNFINISHED,
    TrialStore,
    end_unfinished_trials,
    shorten_error,
)

EXPERIMENT_FIELDS = set(ExperimentRecord.model_fields) - {"id", "created_at"}
# what a transition stamps itself: the status and its times
TRANSITION_FIELDS = EXPERIMENT_FIELDS - {"status", "updated_at", "started_at", "finished_at"}
ADMISSION_LOCK = 7531902469  # Postgres advisory lock: one sweep admitted at a time


class Store(TrialStore):
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

    # --- experiments -----------------------------------------------------------------------

    def create_experiment(
        self,
        *,
        name: str,
        spec: dict[str, Any],
        warnings: list[str],
        max_active: int | None = None,
        ended: str | None = None,
    ) -> ExperimentRecord | None:
        """Record a new sweep, QUEUED (or already ended: `ended`).

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
            ended: A terminal status (SUCCEEDED, PARTIAL, STOPPED, FAILED): the sweep is
                recorded as one that ended without running here, in the same insert, so
                that no supervisor launches it first (a sweep written from elsewhere, a
                test's finished sweep).

        Returns:
            The new sweep, or None when `max_active` sweeps are already active.

        Raises:
            ValueError: `ended` is not a terminal status.
        """
        if ended is not None and _check_status(ended) not in _words(TERMINAL):
            raise ValueError(f"ended={ended!r} is not a terminal status: {_words(TERMINAL)}")
        now = utcnow()
        row = ExperimentRow(
            id=uuid.uuid4().hex[:12],
            name=name,
            status=_check_status(ended) if ended is not None else SweepStatus.QUEUED.value,
            finished_at=now if ended is not None else None,
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
        shorten_error(fields)
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
        shorten_error(fields)
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
                end_unfinished_trials(session, experiment_id, outcome=to.value)
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


class _OverLimit(TunerError):
    """Raised inside create_experiment's transaction to roll its insert back."""


def _lock_admissions(session: Session) -> None:
    """Postgres: serialize admissions until the transaction ends (an advisory lock; at
    READ COMMITTED two inserts would each count before seeing the other's row). SQLite
    needs none: its INSERT takes the database's one write lock before the count."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text(f"SELECT pg_advisory_xact_lock({ADMISSION_LOCK})"))
