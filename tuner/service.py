"""The service's work in plain functions: submit, stop, resume, delete, and the
supervisor that launches queued sweeps as Ray Jobs and reconciles them.

Nothing here runs Tune: sweeps run in their own driver processes (Ray Jobs).
Every function is synchronous (database and Jobs-API calls); the API calls them
in worker threads so its event loop never blocks.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any

from tuner.errors import TunerError
from tuner.launcher import JOB_TERMINAL, JobsTimedOut, JobsUnavailable, Launcher
from tuner.settings import Settings
from tuner.spec import parse_spec, resolve_space, scheduler_in_force
from tuner.statuses import (
    ACTIVE,
    LAUNCHED,
    RESUMABLE,
    STOPPABLE,
    TERMINAL,
    SweepStatus,
    in_order,
)
from tuner.store import ERROR_CHARS, ExperimentRecord, Store, last_lines

log = logging.getLogger("tuner.service")
QUEUED, RUNNING, STOPPING = SweepStatus.QUEUED, SweepStatus.RUNNING, SweepStatus.STOPPING
STOPPED, FAILED = SweepStatus.STOPPED, SweepStatus.FAILED


class Conflict(TunerError):
    """The request does not fit the sweep's current status (HTTP 409)."""


class TooMany(TunerError):
    """A limit of the service is reached (HTTP 429); the message names it."""


@lru_cache(maxsize=256)
def _scheduler_of(spec_json: str) -> dict[str, Any]:
    spec = parse_spec(json.loads(spec_json))
    return scheduler_in_force(spec, resolve_space(spec))


def scheduler_in_force_of(spec: dict[str, Any]) -> dict[str, Any]:
    """The scheduler settings a stored sweep runs with (tuner.spec.scheduler_in_force);
    {} where its stored spec no longer parses (a sweep of an older version)."""
    try:
        return dict(_scheduler_of(json.dumps(spec, sort_keys=True, default=str)))
    except Exception:  # noqa: BLE001 - a view of an old sweep never fails on it
        return {}


def _current(store: Store, experiment_id: str) -> ExperimentRecord:
    """The sweep now; Conflict if a concurrent request deleted it meanwhile."""
    rec = store.get_experiment(experiment_id)
    if rec is None:
        raise Conflict(f"sweep {experiment_id} was deleted by a concurrent request")
    return rec


def submit(
    store: Store, spec: dict[str, Any], warnings: list[str], max_active: int | None = None
) -> ExperimentRecord:
    """Stores a validated spec as a QUEUED sweep; TooMany when `max_active` sweeps are
    already queued or running (counted and stored in one transaction: concurrent
    submissions never get past the limit)."""
    rec = store.create_experiment(
        name=spec["name"], spec=spec, warnings=warnings, max_active=max_active
    )
    if rec is None:
        active = store.count_by_status(ACTIVE)
        raise TooMany(
            f"{active} sweeps are queued or running; this service takes at most "
            f"{max_active} (TUNER_MAX_ACTIVE_SWEEPS): wait for one to end or stop one"
        )
    return rec


def request_stop(store: Store, experiment_id: str) -> ExperimentRecord:
    """QUEUED -> STOPPED at once; RUNNING -> STOPPING with the driver's stop flag set in
    the same compare-and-set (the driver ends gracefully). A request that finds the sweep
    anywhere else changes nothing: Conflict."""
    for _ in range(3):  # the supervisor may move it between QUEUED and RUNNING meanwhile
        if store.transition(experiment_id, STOPPED, allowed_from={QUEUED}):
            return _current(store, experiment_id)
        if store.transition(experiment_id, STOPPING, allowed_from={RUNNING}, stop_requested=True):
            return _current(store, experiment_id)
        rec = _current(store, experiment_id)
        if rec.status == STOPPING:
            return rec  # asked again: the stop timeout keeps counting from the first request
        if rec.status not in STOPPABLE:
            break
    raise Conflict(f"sweep {experiment_id} is {rec.status}; only {_either(STOPPABLE)} stop")


def resume(store: Store, experiment_id: str) -> ExperimentRecord:
    """PARTIAL, STOPPED or FAILED -> QUEUED, with a fresh launch budget (attempts, stop flag and
    error reset in the same compare-and-set); its driver continues from Tune's state."""
    rec = _current(store, experiment_id)
    only = f"only {_either(RESUMABLE)} resume"
    if rec.status not in RESUMABLE:
        raise Conflict(f"sweep {experiment_id} is {rec.status}; {only}")
    fresh = {"stop_requested": False, "attempts": 0, "error": None}
    if not store.transition(experiment_id, QUEUED, allowed_from=RESUMABLE, **fresh):
        rec = _current(store, experiment_id)
        raise Conflict(f"sweep {experiment_id} is {rec.status} now; {only}")
    return _current(store, experiment_id)


def deletable(store: Store, experiment_id: str) -> ExperimentRecord:
    """The record of a sweep that may be deleted (a QUEUED one is stopped first);
    Conflict while it runs."""
    rec = _current(store, experiment_id)
    if rec.status == QUEUED:
        store.transition(experiment_id, STOPPED, allowed_from={QUEUED})
        rec = _current(store, experiment_id)
    if rec.status not in TERMINAL:
        raise Conflict(f"sweep {experiment_id} is {rec.status}; stop it before deleting")
    return rec


def delete(store: Store, experiment_id: str) -> ExperimentRecord:
    """Removes a sweep that is not running from the store, atomically against a resume;
    returns what it was (its Tune files and MLflow runs stay: see tuner.purge)."""
    rec = deletable(store, experiment_id)
    if not store.delete_experiment(experiment_id, allowed_from=TERMINAL):
        rec = store.get_experiment(experiment_id)
        status_now = rec.status if rec else "gone"
        raise Conflict(f"sweep {experiment_id} is {status_now}; stop it before deleting")
    return rec


class Supervisor:
    """Launches QUEUED sweeps in submission order up to max_running_experiments and
    follows their Ray Jobs: a driver that died is resumed (bounded by max_attempts),
    a stop that hangs is enforced, nothing is duplicated or dropped."""

    def __init__(self, store: Store, launcher: Launcher, settings: Settings) -> None:
        self.store = store
        self.launcher = launcher
        self.settings = settings

    def tick(self) -> None:
        """One reconciliation pass (call periodically, and once at start-up)."""
        try:  # an embedded head that died is started again; its sweeps resume below
            self.launcher.restart_lost_head(self.settings.embedded_num_cpus)
        except Exception:  # noqa: BLE001 - the next tick tries again
            log.exception("restarting the embedded Ray head failed; retrying next tick")
        now = datetime.now(UTC)
        for status in in_order(LAUNCHED):
            records, _ = self.store.list_experiments(status=status, limit=10_000)
            for rec in records:
                try:
                    self._follow(rec, now)
                except Exception:  # noqa: BLE001 - one sweep's trouble must not stall the rest
                    log.exception("following sweep %s failed; retrying next tick", rec.id)
        self._launch()

    def _follow(self, rec: ExperimentRecord, now: datetime) -> None:
        if rec.job_id is None:
            if rec.status == STOPPING or rec.stop_requested:
                self.store.transition(rec.id, STOPPED, allowed_from=LAUNCHED)
            elif now - rec.updated_at > timedelta(seconds=30):  # died between claim and submit
                self.store.transition(rec.id, QUEUED, allowed_from={RUNNING})
            return
        job = self.launcher.status(rec.job_id)
        # A job id the job server does not know yet may still land: its submission timed
        # out, or the server is catching up. Only an id older than that is a dead driver.
        settle = timedelta(seconds=2 * self.settings.ray_request_timeout_s + 5)
        if job is None and now - rec.updated_at < settle:
            return
        if job is not None and job not in JOB_TERMINAL:
            stop_age = now - rec.updated_at
            if rec.status == STOPPING and stop_age > timedelta(
                seconds=self.settings.stop_timeout_s
            ):
                log.warning("sweep %s did not stop in time: stopping its job", rec.id)
                self.launcher.stop(rec.job_id)
            return
        cur = self.store.get_experiment(rec.id)
        if cur is None or cur.status in TERMINAL or cur.job_id != rec.job_id:
            return  # the driver wrote its outcome (or a newer attempt runs)
        if cur.status == STOPPING or cur.stop_requested:
            self.store.transition(rec.id, STOPPED, allowed_from=LAUNCHED)
        elif cur.attempts < self.settings.max_attempts:
            log.warning("driver of sweep %s ended (%s) without an outcome: resuming", rec.id, job)
            # while the next attempt runs, what ended this one (the driver clears it into
            # the sweep's warnings when that attempt finishes)
            error = f"attempt {cur.attempts}: driver ended ({job}) without an outcome; resumed"
            self.store.transition(rec.id, QUEUED, allowed_from={RUNNING}, error=error)
        else:
            error = f"driver ended ({job}); the end of its log:\n{self._log_end(rec.job_id)}"
            self.store.transition(rec.id, FAILED, allowed_from=LAUNCHED, error=error)

    def _log_end(self, job_id: str) -> str:
        """The last lines of a driver's log (where a traceback ends), whole lines only,
        saying so where its start is left out."""
        wanted = 2 * ERROR_CHARS
        tail = self.launcher.logs_tail(job_id, chars=wanted)
        if not tail.strip():
            return "(its log is empty or could not be read)"
        return last_lines(tail, ERROR_CHARS - 200, cut=len(tail) >= wanted)

    def _launch(self) -> None:
        free = self.settings.max_running_experiments - self.store.count_by_status(LAUNCHED)
        for rec in self.store.queued_in_order()[: max(free, 0)]:
            if not self.store.transition(rec.id, RUNNING, allowed_from={QUEUED}):
                continue
            attempt, launch = rec.attempts + 1, rec.launches + 1
            # The job id is derived from the sweep and its launch count (never reset, also
            # not by a resume) and stored before submitting: a crash in between leaves an id
            # that either exists (followed) or does not (the driver never started:
            # relaunched), and a submission retried after a lost answer finds its job.
            job_id = f"tuner-{rec.id}-{launch}"
            self.store.update_experiment(rec.id, attempts=attempt, launches=launch, job_id=job_id)
            try:
                self.launcher.submit(rec.id, job_id, resume=rec.tune_path is not None)
            except Exception as err:  # noqa: BLE001 - the cluster refused or is not ready
                cur = self.store.get_experiment(rec.id)
                if _maybe_submitted(err):
                    # the job server may have taken the job before the answer timed out:
                    # keep its id, so _follow finds the job (and stops it if asked) or, if
                    # there is none, relaunches
                    log.warning("submitting sweep %s timed out; following job %s", rec.id, job_id)
                elif cur.stop_requested:
                    self.store.transition(rec.id, STOPPED, allowed_from=LAUNCHED)
                elif _transient(err):  # e.g. the job agent is still starting: retry next tick
                    self.store.update_experiment(
                        rec.id, attempts=rec.attempts, launches=rec.launches, job_id=None
                    )
                    self.store.transition(rec.id, QUEUED, allowed_from={RUNNING})
                else:
                    error = f"could not submit the Ray Job: {err}"
                    self.store.transition(rec.id, FAILED, allowed_from=LAUNCHED, error=error)


def _either(group: frozenset[SweepStatus]) -> str:
    """A group of statuses for a message: "QUEUED or RUNNING", "PARTIAL, STOPPED or
    FAILED"."""
    words = in_order(group)
    return " or ".join([", ".join(words[:-1]), words[-1]] if len(words) > 2 else words)


def _maybe_submitted(err: Exception) -> bool:
    """A request that reached the job server but whose answer never came."""
    return isinstance(err, JobsTimedOut)


def _transient(err: Exception) -> bool:
    """Submission errors worth retrying: the cluster is starting or briefly unreachable."""
    return isinstance(err, JobsUnavailable | ConnectionError | TimeoutError | OSError)
