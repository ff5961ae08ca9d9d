"""A sweep's and a trial's statuses, defined once, with the groups the service acts on.

Every other module (store, service, driver, views, routes, CLI) uses these members, and
the web page asks the server for them (`GET /api/v1/statuses`): no module spells a status
again (tests/unit/test_statuses.py). The members are `str`s, so what the store keeps, the
JSON the API sends and the OpenAPI `enum`s are the plain words. Which status may follow
which is the store's state machine (`tuner.store.TRANSITIONS`), written in these members.
Nothing here imports from tuner.
"""

from __future__ import annotations

from enum import Enum


class _Status(str, Enum):
    """A status word: compares, hashes, prints and serialises as its plain string."""

    def __str__(self) -> str:
        return self.value


class SweepStatus(_Status):
    """A sweep's status in the service. QUEUED: waiting for a free slot. RUNNING: its
    driver (a Ray Job) runs it. STOPPING: a stop was asked, its trials are saving their
    state. SUCCEEDED: some trial finished. STOPPED: stopped or interrupted, resumable.
    FAILED: no trial finished, or its driver could not run (resumable)."""

    QUEUED = "QUEUED"
    RUNNING = "RUNNING"
    STOPPING = "STOPPING"
    SUCCEEDED = "SUCCEEDED"
    PARTIAL = "PARTIAL"
    STOPPED = "STOPPED"
    FAILED = "FAILED"


class TrialStatus(_Status):
    """A trial's status: Ray Tune's own words for a trial (`ray.tune.experiment.Trial`).
    PENDING: not started yet. RUNNING: training. PAUSED: interrupted, resumes from its last
    checkpoint. TERMINATED: finished (its stop criteria or the sweep's ended it). ERROR:
    it failed for good, after its retries (spec `max_failures`); its error is recorded."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    PAUSED = "PAUSED"
    TERMINATED = "TERMINATED"
    ERROR = "ERROR"


# --- a sweep's groups --------------------------------------------------------------------

TERMINAL: frozenset[SweepStatus] = frozenset(
    {SweepStatus.SUCCEEDED, SweepStatus.PARTIAL, SweepStatus.STOPPED, SweepStatus.FAILED}
)
"""A sweep's outcomes: it has ended (finished_at is set); it may be deleted."""

ACTIVE: frozenset[SweepStatus] = frozenset(SweepStatus) - TERMINAL
"""Queued or running: what TUNER_MAX_ACTIVE_SWEEPS counts."""

LAUNCHED: frozenset[SweepStatus] = frozenset({SweepStatus.RUNNING, SweepStatus.STOPPING})
"""Its driver job may be running: the supervisor follows these, and
TUNER_MAX_RUNNING_EXPERIMENTS counts them."""

STOPPABLE: frozenset[SweepStatus] = frozenset({SweepStatus.QUEUED, SweepStatus.RUNNING})
"""Where a stop applies (`POST /stop`, `tuner stop`)."""

RESUMABLE: frozenset[SweepStatus] = frozenset(
    {SweepStatus.PARTIAL, SweepStatus.STOPPED, SweepStatus.FAILED}
)
"""Where a resume applies (`POST /resume`)."""

# --- a trial's groups --------------------------------------------------------------------

TRIAL_ENDED: frozenset[TrialStatus] = frozenset({TrialStatus.TERMINATED, TrialStatus.ERROR})
"""A trial that will not run again: finished or failed."""

TRIAL_UNFINISHED: frozenset[TrialStatus] = frozenset(TrialStatus) - TRIAL_ENDED
"""A trial still to run or resume: a sweep that ends with one was interrupted."""


def in_order(group: frozenset[SweepStatus] | frozenset[TrialStatus]) -> list[str]:
    """A group's words in their enum's order (for messages and clients)."""
    if not group:
        return []
    return [s.value for s in type(next(iter(group))) if s in group]


__all__ = [
    "ACTIVE",
    "LAUNCHED",
    "RESUMABLE",
    "STOPPABLE",
    "TERMINAL",
    "TRIAL_ENDED",
    "TRIAL_UNFINISHED",
    "SweepStatus",
    "TrialStatus",
    "in_order",
]
