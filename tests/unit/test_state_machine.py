"""The sweep state machine, on a real SQLite store: every allowed and refused status
change, stop / resume / delete from each status, the supervisor's relaunch limit
(`max_attempts`) and stop deadline (`stop_timeout_s`). No Ray: the supervisor is given
a stand-in for the Ray Jobs API (tests/integration/test_supervisor.py and the e2e
tests drive the real one)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tuner import service
from tuner.settings import Settings
from tuner.statuses import TERMINAL, SweepStatus
from tuner.store import TRANSITIONS, Store
from tuner.store._models import utcnow

SPEC = {"name": "sm", "algorithm": "PPO", "env": "CartPole-v1"}


@pytest.fixture
def store(tmp_path):
    s = Store(f"sqlite:///{tmp_path / 'tuner.db'}")
    yield s
    s.close()


def at(store: Store, status: str) -> str:
    """A sweep put in `status` directly (the path there is tested separately)."""
    rec = service.submit(store, SPEC, [])
    store.update_experiment(rec.id, status=status)
    return rec.id


STATUSES = list(SweepStatus)
PAIRS = [(a, b) for a in STATUSES for b in STATUSES if a != b]


@pytest.mark.parametrize(("source", "target"), PAIRS)
def test_every_status_change_is_allowed_or_refused_as_the_table_says(store, source, target):
    exp = at(store, source)
    if target in TRANSITIONS[source]:
        assert store.transition(exp, target, allowed_from={source})
        assert store.get_experiment(exp).status == target
    else:
        with pytest.raises(ValueError, match="state machine"):
            store.transition(exp, target, allowed_from={source})
        assert store.get_experiment(exp).status == source


def test_the_table_covers_every_status_and_only_succeeded_is_final():
    assert set(TRANSITIONS) == set(STATUSES)
    assert [s for s, to in TRANSITIONS.items() if not to] == ["SUCCEEDED"]
    assert all(to <= set(STATUSES) for to in TRANSITIONS.values())


def test_a_change_is_compare_and_set_on_the_current_status(store):
    exp = at(store, "RUNNING")
    assert not store.transition(exp, "RUNNING", allowed_from={"QUEUED"})
    assert store.get_experiment(exp).status == "RUNNING"


def test_full_cycle_queued_running_stopping_stopped_running(store):
    exp = service.submit(store, SPEC, []).id
    assert store.transition(exp, "RUNNING", allowed_from={"QUEUED"})
    assert service.request_stop(store, exp).status == "STOPPING"
    assert store.get_experiment(exp).stop_requested
    assert store.transition(exp, "STOPPED", allowed_from={"STOPPING"})
    assert store.get_experiment(exp).finished_at is not None
    resumed = service.resume(store, exp)
    assert resumed.status == "QUEUED"
    assert not resumed.stop_requested
    assert resumed.finished_at is None
    assert store.transition(exp, "RUNNING", allowed_from={"QUEUED"})


@pytest.mark.parametrize(
    ("status", "after"),
    [("QUEUED", "STOPPED"), ("RUNNING", "STOPPING"), ("STOPPING", "STOPPING")],
)
def test_stop_from_each_status_that_can_stop(store, status, after):
    exp = at(store, status)
    assert service.request_stop(store, exp).status == after


@pytest.mark.parametrize("status", sorted(TERMINAL))
def test_stop_of_a_finished_sweep_is_a_conflict_and_changes_nothing(store, status):
    exp = at(store, status)
    with pytest.raises(service.Conflict, match="only QUEUED or RUNNING"):
        service.request_stop(store, exp)
    rec = store.get_experiment(exp)
    assert rec.status == status
    assert not rec.stop_requested


@pytest.mark.parametrize("status", ["PARTIAL", "STOPPED", "FAILED"])
def test_resume_resets_the_launch_budget(store, status):
    exp = at(store, status)
    store.update_experiment(exp, attempts=3, error="driver ended", stop_requested=True)
    rec = service.resume(store, exp)
    assert (rec.status, rec.attempts, rec.error, rec.stop_requested) == ("QUEUED", 0, None, False)


@pytest.mark.parametrize("status", ["QUEUED", "RUNNING", "STOPPING", "SUCCEEDED"])
def test_resume_from_any_other_status_is_a_conflict(store, status):
    exp = at(store, status)
    with pytest.raises(service.Conflict, match="only PARTIAL, STOPPED or FAILED"):
        service.resume(store, exp)
    assert store.get_experiment(exp).status == status


@pytest.mark.parametrize("status", ["RUNNING", "STOPPING"])
def test_delete_while_it_runs_is_a_conflict_and_keeps_it(store, status):
    exp = at(store, status)
    with pytest.raises(service.Conflict, match="stop it before deleting"):
        service.delete(store, exp)
    assert store.get_experiment(exp).status == status


@pytest.mark.parametrize("status", ["QUEUED", *sorted(TERMINAL)])
def test_delete_of_a_queued_or_finished_sweep(store, status):
    exp = at(store, status)
    assert service.delete(store, exp).id == exp
    assert store.get_experiment(exp) is None


class JobsStandIn:
    """What the supervisor asks the Ray Jobs API, answered from a dict."""

    def __init__(self) -> None:
        self.jobs: dict[str, str] = {}
        self.stopped: list[str] = []

    def submit(self, experiment_id: str, job_id: str, resume: bool) -> str:
        self.jobs[job_id] = "RUNNING"
        return job_id

    def status(self, job_id: str) -> str | None:
        return self.jobs.get(job_id)

    def stop(self, job_id: str) -> None:
        self.stopped.append(job_id)

    def logs_tail(self, job_id: str, chars: int = 3000) -> str:
        return "Traceback: the driver died"


def supervisor(store: Store, tmp_path, **settings) -> tuple[service.Supervisor, JobsStandIn]:
    jobs = JobsStandIn()
    cfg = Settings(data_dir=tmp_path, ray_request_timeout_s=1, **settings)
    return service.Supervisor(store, jobs, cfg), jobs  # type: ignore[arg-type]


def test_a_dead_driver_is_relaunched_until_max_attempts_then_failed(store, tmp_path):
    sup, jobs = supervisor(store, tmp_path, max_attempts=2)
    exp = service.submit(store, SPEC, []).id
    for attempt in (1, 2):
        sup.tick()
        rec = store.get_experiment(exp)
        assert (rec.status, rec.attempts) == ("RUNNING", attempt)
        jobs.jobs[rec.job_id] = "FAILED"  # the driver died without writing an outcome
        sup.tick()
        rec = store.get_experiment(exp)
        if attempt == 1:
            assert rec.status in ("QUEUED", "RUNNING")
            assert "resumed" in rec.error
    rec = store.get_experiment(exp)
    assert rec.status == "FAILED"
    assert rec.attempts == 2
    assert "the driver died" in rec.error
    assert len(jobs.jobs) == 2


def test_a_stop_past_its_deadline_is_enforced_through_ray(store, tmp_path):
    sup, jobs = supervisor(store, tmp_path, stop_timeout_s=5)
    exp = service.submit(store, SPEC, []).id
    sup.tick()
    service.request_stop(store, exp)
    job = store.get_experiment(exp).job_id
    sup.tick()
    assert jobs.stopped == []  # within the deadline: the driver stops by itself
    store.update_experiment(exp, updated_at=utcnow() - timedelta(seconds=6))
    sup.tick()
    assert jobs.stopped == [job]
    jobs.jobs[job] = "STOPPED"
    sup.tick()
    assert store.get_experiment(exp).status == "STOPPED"


def test_queued_sweeps_launch_in_order_up_to_the_running_limit(store, tmp_path):
    sup, jobs = supervisor(store, tmp_path, max_running_experiments=1)
    first, second = (service.submit(store, SPEC, []).id for _ in range(2))
    sup.tick()
    assert [store.get_experiment(e).status for e in (first, second)] == ["RUNNING", "QUEUED"]
    store.transition(first, "SUCCEEDED", allowed_from={"RUNNING"})
    sup.tick()
    assert store.get_experiment(second).status == "RUNNING"


# --- a request that loses a race writes nothing ------------------------------------------


def test_a_stale_resume_that_loses_the_race_leaves_the_sweep_alone(store):
    """Resume reads STOPPED; before its compare-and-set, another resume wins, the
    supervisor launches the sweep and a stop is asked. The stale resume is a Conflict and
    leaves the running sweep's stop flag, launch count and error as they were (it used to
    reset them before its compare-and-set: the stop was lost and the budget refilled)."""
    exp = at(store, "STOPPED")
    store.update_experiment(exp, attempts=2, error="driver ended (FAILED)")
    real_get = store.get_experiment
    raced: list[object] = []

    def stale_then_race(experiment_id: str):
        rec = real_get(experiment_id)
        if not raced:  # the stale resume has read STOPPED; now the others run
            raced.append(rec)
            store.get_experiment = real_get  # type: ignore[method-assign]
            service.resume(store, exp)
            assert store.transition(exp, "RUNNING", allowed_from={"QUEUED"})
            store.update_experiment(exp, attempts=1, launches=3, job_id=f"tuner-{exp}-3")
            store.update_experiment(exp, error="a warning the driver wrote")
            assert service.request_stop(store, exp).status == "STOPPING"
            raced.append(real_get(exp))
            store.get_experiment = stale_then_race  # type: ignore[method-assign]
        return rec

    store.get_experiment = stale_then_race  # type: ignore[method-assign]
    with pytest.raises(service.Conflict, match="STOPPING now"):
        service.resume(store, exp)
    store.get_experiment = real_get  # type: ignore[method-assign]
    before, after = raced[1], store.get_experiment(exp)
    assert after == before  # every field, updated_at included
    assert (after.status, after.stop_requested, after.attempts) == ("STOPPING", True, 1)


@pytest.mark.parametrize("outcome", ["SUCCEEDED", "FAILED", "STOPPED"])
def test_a_stop_that_loses_the_race_to_the_drivers_outcome_writes_nothing(store, outcome):
    """The driver writes its outcome just before the stop's compare-and-set: the stop is a
    Conflict, and the finished sweep keeps its stop flag and updated_at (the stop flag used
    to be written, then taken back, outside the compare-and-set)."""
    exp = at(store, "RUNNING")
    real_transition = store.transition
    after_outcome: list[object] = []

    def outcome_first(experiment_id: str, to: str, **kwargs):
        if to == "STOPPING" and not after_outcome:
            assert real_transition(experiment_id, outcome, allowed_from={"RUNNING"})
            after_outcome.append(store.get_experiment(experiment_id))
        return real_transition(experiment_id, to, **kwargs)

    store.transition = outcome_first  # type: ignore[method-assign]
    with pytest.raises(service.Conflict, match=f"is {outcome}; only QUEUED or RUNNING"):
        service.request_stop(store, exp)
    assert store.get_experiment(exp) == after_outcome[0]
    assert not store.get_experiment(exp).stop_requested


@pytest.mark.parametrize("status", sorted(TERMINAL))
def test_a_refused_stop_or_resume_leaves_the_row_as_it_was(store, status):
    exp = at(store, status)
    store.update_experiment(exp, attempts=2, error="kept", stop_requested=status == "STOPPED")
    before = store.get_experiment(exp)
    with pytest.raises(service.Conflict):
        service.request_stop(store, exp)
    assert store.get_experiment(exp) == before  # updated_at too: no write at all
    if status == "SUCCEEDED":
        with pytest.raises(service.Conflict):
            service.resume(store, exp)
        assert store.get_experiment(exp) == before


def test_a_transition_writes_its_fields_only_when_it_moves(store):
    exp = at(store, "FAILED")
    store.update_experiment(exp, attempts=3, error="boom")
    assert not store.transition(exp, "RUNNING", allowed_from={"QUEUED"}, attempts=0, error=None)
    rec = store.get_experiment(exp)
    assert (rec.status, rec.attempts, rec.error) == ("FAILED", 3, "boom")
    assert store.transition(exp, "QUEUED", allowed_from={"FAILED"}, attempts=0, error=None)
    rec = store.get_experiment(exp)
    assert (rec.status, rec.attempts, rec.error) == ("QUEUED", 0, None)
    with pytest.raises(TypeError, match="status"):
        store.transition(exp, "RUNNING", allowed_from={"QUEUED"}, status="FAILED")
