"""The store on a real SQLite file: CRUD, compare-and-set, idempotent writes, many processes."""

from __future__ import annotations

import multiprocessing
from datetime import timezone

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, text

from tuner.statuses import TERMINAL
from tuner.store import MetricPoint, Store
from tuner.store._models import Base

SPEC = {"name": "cartpole", "algorithm": "PPO", "env": "CartPole-v1"}


@pytest.fixture
def url(tmp_path):
    return f"sqlite:///{tmp_path / 'data' / 'store.db'}"


@pytest.fixture
def store(url):
    s = Store(url)
    yield s
    s.close()


def make(store, name="sweep"):
    return store.create_experiment(name=name, spec=SPEC, warnings=["w1"])


def test_create_get_roundtrip(store):
    created = make(store)
    got = store.get_experiment(created.id)
    assert got == created
    assert got.status == "QUEUED"
    assert got.spec == SPEC
    assert got.warnings == ["w1"]
    assert len(got.id) == 12
    assert got.attempts == 0
    assert got.stop_requested is False
    assert got.created_at.tzinfo is not None
    assert got.created_at.utcoffset().total_seconds() == 0
    assert got.started_at is None
    assert got.finished_at is None
    assert store.get_experiment("nope") is None


def test_list_pages_newest_first_with_status_filter_and_total(store):
    ids = [make(store, f"s{i}").id for i in range(5)]
    store.transition(ids[1], "RUNNING", allowed_from={"QUEUED"})
    page, total = store.list_experiments(limit=2)
    assert total == 5
    assert [e.id for e in page] == [ids[4], ids[3]]
    page, total = store.list_experiments(limit=2, offset=4)
    assert total == 5
    assert [e.id for e in page] == [ids[0]]
    queued, total = store.list_experiments(status="QUEUED")
    assert total == 4
    assert ids[1] not in [e.id for e in queued]
    running, total = store.list_experiments(status="RUNNING")
    assert total == 1
    assert running[0].id == ids[1]
    assert [e.id for e in store.queued_in_order()] == [ids[0], ids[2], ids[3], ids[4]]
    assert store.count_by_status({"QUEUED", "RUNNING"}) == 5
    assert store.count_by_status({"RUNNING"}) == 1
    assert store.count_by_status({"FAILED"}) == 0


def test_transition_is_compare_and_set(store):
    exp = make(store)
    assert store.transition(exp.id, "RUNNING", allowed_from={"QUEUED"})
    assert not store.transition(exp.id, "RUNNING", allowed_from={"QUEUED"})
    running = store.get_experiment(exp.id)
    assert running.status == "RUNNING"
    assert running.started_at is not None
    assert running.finished_at is None
    assert running.updated_at >= exp.updated_at

    assert store.transition(exp.id, "STOPPING", allowed_from={"QUEUED", "RUNNING"})
    assert store.transition(exp.id, "STOPPED", allowed_from={"STOPPING"})
    stopped = store.get_experiment(exp.id)
    assert "STOPPED" in TERMINAL
    assert stopped.finished_at is not None

    # Resume: back to QUEUED then RUNNING keeps the first start and clears finished_at.
    assert store.transition(exp.id, "QUEUED", allowed_from=TERMINAL)
    assert store.transition(exp.id, "RUNNING", allowed_from={"QUEUED"})
    resumed = store.get_experiment(exp.id)
    assert resumed.started_at == running.started_at
    assert resumed.finished_at is None

    assert not store.transition("missing", "RUNNING", allowed_from={"QUEUED"})
    with pytest.raises(ValueError, match="unknown experiment status"):
        store.transition(exp.id, "DONE", allowed_from={"RUNNING"})


def test_update_experiment_sets_fields_and_bumps_updated_at(store):
    exp = make(store)
    best = {"trial_id": "t1", "config": {"lr": 0.01}, "metric_value": 450.0, "checkpoint": "/c"}
    updated = store.update_experiment(
        exp.id, job_id="raysubmit_1", best=best, attempts=1, stop_requested=True, error="boom"
    )
    assert updated.job_id == "raysubmit_1"
    assert updated.best == best
    assert updated.attempts == 1
    assert updated.stop_requested is True
    assert updated.error == "boom"
    assert updated.updated_at > exp.updated_at
    assert updated.created_at == exp.created_at
    assert store.get_experiment(exp.id) == updated
    assert store.update_experiment("missing", error="x") is None
    with pytest.raises(TypeError, match="id"):
        store.update_experiment(exp.id, id="other")


def test_upsert_trial_inserts_then_updates_and_counts(store):
    exp = make(store)
    store.upsert_trial(exp.id, "t2", status="RUNNING", config={"lr": 0.1}, seed=2**40)
    store.upsert_trial(exp.id, "t1", status="RUNNING", config={"lr": 0.2}, node_ip="10.0.0.1")
    store.upsert_trial(exp.id, "t1", status="TERMINATED", iterations=7, env_steps=7000)
    store.upsert_trial(exp.id, "t1", metric=float("nan"), best_metric=120.5)
    trials = store.list_trials(exp.id)
    assert [t.trial_id for t in trials] == ["t1", "t2"]
    t1 = store.get_trial(exp.id, "t1")
    assert t1.status == "TERMINATED"
    assert t1.config == {"lr": 0.2}
    assert t1.node_ip == "10.0.0.1"
    assert t1.iterations == 7
    assert t1.env_steps == 7000
    assert t1.metric is None
    assert t1.best_metric == 120.5
    assert store.get_trial(exp.id, "t2").seed == 2**40
    assert store.get_trial(exp.id, "t9") is None
    assert store.trial_counts(exp.id) == {"TERMINATED": 1, "RUNNING": 1}
    with pytest.raises(TypeError, match="bogus"):
        store.upsert_trial(exp.id, "t1", bogus=1)


def test_metric_points_are_idempotent_per_iteration(store):
    exp = make(store)
    store.upsert_trial(exp.id, "t1", status="RUNNING")
    first = [
        MetricPoint(iteration=i, env_steps=100 * i, time_s=float(i), values={"ret": i, "len": 9})
        for i in (1, 2, 3)
    ]
    store.add_metric_points(exp.id, "t1", first)
    store.add_metric_points(exp.id, "t1", [MetricPoint(iteration=2, values={"ret": 99.0})])
    store.add_metric_points(exp.id, "t1", [])
    history = store.metric_history(exp.id, "t1")
    assert [p.iteration for p in history] == [1, 2, 3]
    assert history[1] == MetricPoint(iteration=2, values={"ret": 99.0})
    assert history[2].env_steps == 300
    assert history[2].time_s == 3.0


def test_metric_history_filters_keys(store):
    exp = make(store)
    point = MetricPoint(iteration=1, values={"a": 1.0, "b": 2.0, "c": float("nan")})
    store.add_metric_points(exp.id, "t1", [point])
    assert store.metric_history(exp.id, "t1")[0].values == {"a": 1.0, "b": 2.0}
    assert store.metric_history(exp.id, "t1", keys=["b", "zzz"])[0].values == {"b": 2.0}
    assert store.metric_history(exp.id, "other") == []


def test_delete_cascades_to_trials_and_metric_points(store):
    exp, keep = make(store), make(store, "keep")
    for e in (exp, keep):
        store.upsert_trial(e.id, "t1", status="RUNNING")
        store.add_metric_points(e.id, "t1", [MetricPoint(iteration=1, values={"a": 1.0})])
    assert store.delete_experiment(exp.id)
    assert not store.delete_experiment(exp.id)
    assert store.get_experiment(exp.id) is None
    assert store.list_trials(exp.id) == []
    assert store.metric_history(exp.id, "t1") == []
    assert len(store.list_trials(keep.id)) == 1
    assert len(store.metric_history(keep.id, "t1")) == 1


def test_delete_only_from_allowed_statuses_keeps_everything_otherwise(store):
    exp = make(store)  # QUEUED
    store.upsert_trial(exp.id, "t1", status="PENDING")
    assert not store.delete_experiment(exp.id, allowed_from=TERMINAL)
    assert store.get_experiment(exp.id).status == "QUEUED"
    assert len(store.list_trials(exp.id)) == 1  # nothing half-deleted
    assert store.transition(exp.id, "STOPPED", allowed_from={"QUEUED"})
    assert store.delete_experiment(exp.id, allowed_from=TERMINAL)
    assert store.get_experiment(exp.id) is None
    assert store.list_trials(exp.id) == []
    # a resume that comes after the delete finds nothing to move
    assert not store.transition(exp.id, "QUEUED", allowed_from={"STOPPED"})


def test_trial_of_unknown_experiment_is_rejected(store):
    with pytest.raises(Exception, match="FOREIGN KEY"):
        store.upsert_trial("missing", "t1", status="RUNNING")


def test_two_stores_on_one_file_see_each_others_writes(url):
    api, driver = Store(url), Store(url)
    try:
        exp = api.create_experiment(name="shared", spec=SPEC, warnings=[])
        assert driver.transition(exp.id, "RUNNING", allowed_from={"QUEUED"})
        driver.upsert_trial(exp.id, "t1", status="RUNNING")
        driver.add_metric_points(exp.id, "t1", [MetricPoint(iteration=1, values={"a": 1.0})])
        assert api.get_experiment(exp.id).status == "RUNNING"
        assert api.trial_counts(exp.id) == {"RUNNING": 1}
        assert len(api.metric_history(exp.id, "t1")) == 1
        api.update_experiment(exp.id, stop_requested=True)
        assert driver.get_experiment(exp.id).stop_requested is True
    finally:
        api.close()
        driver.close()


def test_migration_is_at_head_and_matches_models(store, url):
    engine = create_engine(url)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() == "0007"
        assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    engine.dispose()
    assert diff == []
    Store(url).close()  # opening an up-to-date store again is a no-op


def test_in_memory_sqlite_works():
    mem = Store("sqlite://")
    exp = mem.create_experiment(name="m", spec={}, warnings=[])
    assert mem.list_experiments() == ([exp], 1)
    assert exp.created_at.tzinfo == timezone.utc
    mem.close()


# --- several processes ------------------------------------------------------------------------


def _open(url):
    Store(url).close()


def _writer(url, experiment_id, worker, barrier):
    store = Store(url)
    barrier.wait()
    for i in range(50):
        trial_id = f"w{worker}_{i:02d}"
        store.upsert_trial(experiment_id, trial_id, status="RUNNING", config={"i": i})
        store.add_metric_points(
            experiment_id, trial_id, [MetricPoint(iteration=1, values={"ret": float(i)})]
        )
        # Both workers also race on the same trial and the same iterations.
        store.upsert_trial(experiment_id, f"shared_{i:02d}", status="RUNNING", iterations=i)
        store.add_metric_points(
            experiment_id, "shared", [MetricPoint(iteration=i, values={"by": float(worker)})]
        )
        store.upsert_trial(experiment_id, trial_id, status="TERMINATED", iterations=1)
    store.close()


def _run_all(processes):
    for p in processes:
        p.start()
    for p in processes:
        p.join(timeout=120)
    assert [p.exitcode for p in processes] == [0] * len(processes)


def test_processes_opening_a_fresh_file_at_once_migrate_once(url):
    ctx = multiprocessing.get_context("spawn")
    _run_all([ctx.Process(target=_open, args=(url,)) for _ in range(3)])
    store = Store(url)
    assert store.list_experiments() == ([], 0)
    store.close()


def test_concurrent_writer_processes(store, url):
    exp = make(store)
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(2)
    _run_all([ctx.Process(target=_writer, args=(url, exp.id, n, barrier)) for n in (0, 1)])
    trials = store.list_trials(exp.id)
    assert len(trials) == 150
    assert store.trial_counts(exp.id) == {"TERMINATED": 100, "RUNNING": 50}
    for worker in (0, 1):
        for i in (0, 49):
            history = store.metric_history(exp.id, f"w{worker}_{i:02d}")
            assert history == [MetricPoint(iteration=1, values={"ret": float(i)})]
    shared = store.metric_history(exp.id, "shared")
    assert [p.iteration for p in shared] == list(range(50))


def test_a_sweep_recorded_as_ended_is_never_queued(store):
    rec = store.create_experiment(name="done", spec=SPEC, warnings=[], ended="SUCCEEDED")
    got = store.get_experiment(rec.id)
    assert got.status == "SUCCEEDED"
    assert got.finished_at is not None
    assert store.queued_in_order() == []  # a supervisor has nothing of it to launch
    with pytest.raises(ValueError, match="ended='RUNNING' is not a terminal status"):
        store.create_experiment(name="live", spec=SPEC, warnings=[], ended="RUNNING")
    assert store.list_experiments()[1] == 1  # nothing stored for the refused one
