"""A sweep's errors as the page shows them: cut at line boundaries keeping the end that
explains (and saying it was shortened); a sweep that ends FAILED or STOPPED leaves no trial
looking live; an earlier attempt's end is not the error of a sweep that then succeeded."""

from __future__ import annotations

import pytest

from tests.unit.test_state_machine import SPEC, JobsStandIn
from tuner import service
from tuner.settings import Settings
from tuner.store import ERROR_CHARS, Store, last_lines

TRACEBACK = "\n".join(
    ["Traceback (most recent call last):"]
    + [
        f'  File "/srv/tuner/module_{i}.py", line {i}, in step\n    do_work({i})'
        for i in range(300)
    ]
    + ["RuntimeError: the learner ran out of memory under resource contention and gave up"]
)


@pytest.fixture
def store(tmp_path):
    s = Store(f"sqlite:///{tmp_path / 'tuner.db'}")
    yield s
    s.close()


def test_a_long_error_keeps_its_last_whole_lines_and_says_it_was_shortened():
    short = last_lines(TRACEBACK)
    first, *rest = short.split("\n")
    assert first.startswith("[shortened:")
    assert "left out" in first
    assert len(short) <= ERROR_CHARS + len(first) + 1
    assert rest[0] in TRACEBACK.split("\n")  # a whole line, not the middle of one
    assert short.endswith(
        "RuntimeError: the learner ran out of memory under resource contention and gave up"
    )
    assert last_lines("one line\nand another") == "one line\nand another"  # short: as is


def test_a_log_tail_cut_mid_word_loses_its_partial_first_line():
    tail = TRACEBACK[-3000:]  # what a "last 3000 characters" gives: it starts mid-line
    kept = last_lines(tail, cut=True)
    first, second = kept.split("\n")[:2]
    assert first == "[shortened: its start is left out; the end follows]"
    assert second in TRACEBACK.split("\n")
    assert not tail.startswith(second)


def test_a_single_overlong_line_keeps_its_end_from_a_word():
    line = " ".join(f"word{i}" for i in range(2000))
    kept = last_lines(line, 100).split("\n")
    assert kept[0].startswith("[shortened")
    assert kept[1].startswith("word")
    assert kept[1].endswith("word1999")


def test_the_store_keeps_errors_so(store):
    exp = service.submit(store, SPEC, []).id
    store.update_experiment(exp, error=TRACEBACK)
    error = store.get_experiment(exp).error
    assert error.startswith("[shortened:")
    assert error.endswith("and gave up")
    store.upsert_trial(exp, "t_0", error=TRACEBACK)
    assert store.get_trial(exp, "t_0").error.split("\n")[0].startswith("[shortened:")


def test_a_driver_that_fails_for_good_shows_its_logs_end_from_a_line(store, tmp_path):
    class LongLog(JobsStandIn):
        def logs_tail(self, job_id: str, chars: int = 3000) -> str:
            return ("x" * 50_000 + "\n" + TRACEBACK)[-chars:]

    jobs = LongLog()
    sup = service.Supervisor(store, jobs, Settings(data_dir=tmp_path, max_attempts=1))
    exp = service.submit(store, SPEC, []).id
    sup.tick()
    jobs.jobs[store.get_experiment(exp).job_id] = "FAILED"
    sup.tick()
    rec = store.get_experiment(exp)
    assert rec.status == "FAILED"
    head, note, first = rec.error.split("\n")[:3]
    assert head == "driver ended (FAILED); the end of its log:"
    assert note.startswith("[shortened:")
    assert first in TRACEBACK.split("\n")  # starts at a line, never mid-word
    assert rec.error.endswith("resource contention and gave up")


@pytest.mark.parametrize("outcome", ["FAILED", "STOPPED"])
def test_trials_left_pending_or_running_are_paused_when_the_sweep_ends(store, outcome):
    exp = service.submit(store, SPEC, []).id
    store.transition(exp, "RUNNING", allowed_from={"QUEUED"})
    for trial, status in [("a", "PENDING"), ("b", "RUNNING"), ("c", "TERMINATED"), ("d", "ERROR")]:
        store.upsert_trial(exp, trial, status=status)
    store.upsert_trial(exp, "b", error="Failure # 1\nValueError: retried after this", retries=1)
    assert store.transition(exp, outcome, allowed_from={"RUNNING"}, error="the driver died")
    trials = {t.trial_id: t for t in store.list_trials(exp)}
    assert {k: t.status for k, t in trials.items()} == {
        "a": "PAUSED",
        "b": "PAUSED",
        "c": "TERMINATED",
        "d": "ERROR",
    }
    if outcome == "FAILED":  # says why it did not finish, below the error it had
        assert trials["a"].error.startswith("not finished: the sweep FAILED")
        assert trials["b"].error.startswith("Failure # 1\nValueError: retried after this\n")
        assert trials["b"].error.endswith("a resume continues it")
    else:
        assert trials["a"].error is None
    assert trials["c"].error is None


def test_a_sweep_stopped_by_the_supervisor_leaves_no_trial_running(store, tmp_path):
    jobs = JobsStandIn()
    sup = service.Supervisor(store, jobs, Settings(data_dir=tmp_path))
    exp = service.submit(store, SPEC, []).id
    sup.tick()
    store.upsert_trial(exp, "t", status="RUNNING")
    service.request_stop(store, exp)
    jobs.jobs[store.get_experiment(exp).job_id] = "STOPPED"  # the driver died stopping
    sup.tick()
    assert store.get_experiment(exp).status == "STOPPED"
    assert store.get_trial(exp, "t").status == "PAUSED"


@pytest.mark.parametrize("outcome", ["FAILED", "STOPPED"])
def test_a_live_status_written_after_the_sweep_ended_is_stored_paused(store, tmp_path, outcome):
    """The supervisor ends a sweep whose job it stopped; the dying driver's last result
    still arrives (RUNNING, a new iteration): the trial keeps the iteration and is
    PAUSED, never RUNNING under an ended sweep. A trial that finished keeps its end."""
    exp = service.submit(store, SPEC, []).id
    store.transition(exp, "RUNNING", allowed_from={"QUEUED"})
    store.upsert_trial(exp, "t", status="RUNNING", iterations=2)
    store.upsert_trial(exp, "done", status="TERMINATED")
    assert store.transition(exp, outcome, allowed_from={"RUNNING"})
    store.upsert_trial(exp, "t", status="RUNNING", iterations=3)
    store.upsert_trial(exp, "new", status="PENDING")
    store.upsert_trial(exp, "unsaid")  # a new row without a status: PENDING by default
    store.upsert_trial(exp, "done", score=1.0)  # no status given: the trial keeps its own
    trials = {t.trial_id: (t.status, t.iterations) for t in store.list_trials(exp)}
    assert trials == {
        "t": ("PAUSED", 3),
        "new": ("PAUSED", 0),
        "unsaid": ("PAUSED", 0),
        "done": ("TERMINATED", 0),
    }
    note = store.get_trial(exp, "t").error
    if outcome == "FAILED":  # why it did not finish, as the end wrote it for the others
        assert note.startswith("not finished: the sweep FAILED")
    else:
        assert note is None
    # a resume makes the sweep live again: its trials run again
    assert store.transition(exp, "QUEUED", allowed_from={outcome})
    store.upsert_trial(exp, "t", status="RUNNING", iterations=4)
    assert store.get_trial(exp, "t").status == "RUNNING"


def test_a_sweep_that_succeeds_after_a_resume_keeps_the_earlier_end_as_history(
    tmp_path, monkeypatch
):
    """The supervisor resumed the sweep after attempt 1's driver died; attempt 2 succeeds:
    the sweep has no error, a warning says what ended attempt 1; a trial retried once
    keeps the error it was retried after (the summary has none for it)."""
    from tests.unit.test_live_scores import SPEC as LIVE
    from tests.unit.test_live_scores import run_driver
    from tuner.views import TrialView

    store = Store(f"sqlite:///{tmp_path / 'tuner.db'}")
    exp_id = store.create_experiment(name="live", spec=LIVE, warnings=[]).id
    store.update_experiment(exp_id, status="RUNNING", attempts=2, job_id="j-2")
    earlier = "attempt 1: driver ended (FAILED) without an outcome; resumed"
    store.update_experiment(exp_id, error=earlier)
    retried = "Failure # 1\nTraceback (most recent call last):\nRuntimeError: the env crashed"
    store.upsert_trial(exp_id, "t_00001", status="RUNNING", error=retried, retries=1)
    done = TrialView(trial_id="t_00001", status="TERMINATED", iterations=16, retries=1)
    assert run_driver(monkeypatch, tmp_path, exp_id, lambda rec: None, [done]) == 0
    rec = store.get_experiment(exp_id)
    assert rec.status == "SUCCEEDED"
    assert rec.error is None
    assert f"an earlier attempt of this sweep ended early: {earlier}" in rec.warnings
    trial = store.get_trial(exp_id, "t_00001")
    assert (trial.error, trial.retries) == (retried, 1)
    store.close()
