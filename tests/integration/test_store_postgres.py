"""The store on a real PostgreSQL server: a throwaway cluster started for this module."""

from __future__ import annotations

import glob
import multiprocessing
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from tuner.store import MetricPoint, Store

pytestmark = pytest.mark.integration

SPEC = {"name": "cartpole", "algorithm": "PPO", "env": "CartPole-v1"}


def _pg_bin() -> Path | None:
    """The newest PostgreSQL server bin directory (Debian layout first, then PATH)."""
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=lambda p: int(p.split("/")[4])
    )
    if found:
        return Path(found[-1]).parent
    pg_ctl = shutil.which("pg_ctl")
    return Path(pg_ctl).parent if pg_ctl and shutil.which("initdb") else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def pg_server():
    """Start initdb + pg_ctl on a free localhost port; yield the server's base URL."""
    bin_dir = _pg_bin()
    if bin_dir is None:
        pytest.skip("PostgreSQL server binaries not installed (apt-get install postgresql)")
    as_user: list[str] = []
    root = Path(tempfile.mkdtemp(prefix="tuner-pg-"))  # short: unix socket paths are limited
    if os.geteuid() == 0:  # postgres refuses to run as root
        shutil.chown(root, user="postgres", group="postgres")
        as_user = ["runuser", "-u", "postgres", "--"]
    data, port = root / "data", _free_port()

    def run(*cmd: str | Path) -> None:
        subprocess.run([*as_user, *map(str, cmd)], check=True, capture_output=True, timeout=120)

    try:
        run(bin_dir / "initdb", "-D", data, "-U", "tuner", "--auth=trust", "-E", "UTF8", "-N")
        options = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -F"
        run(bin_dir / "pg_ctl", "-D", data, "-l", root / "server.log", "-o", options, "-w", "start")
    except subprocess.CalledProcessError as exc:
        log = root / "server.log"
        detail = log.read_text() if log.exists() else ""
        shutil.rmtree(root, ignore_errors=True)
        pytest.fail(f"could not start PostgreSQL: {exc.stderr.decode()}{detail}")
    try:
        yield f"postgresql+psycopg://tuner@127.0.0.1:{port}"
    finally:
        run(bin_dir / "pg_ctl", "-D", data, "-m", "fast", "-w", "stop")
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def pg_url(pg_server, request):
    """A fresh, empty database on the module's server."""
    name = "t_" + request.node.name.lower().replace("[", "_").replace("]", "")[:50]
    admin = create_engine(f"{pg_server}/postgres", isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}"'))
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return f"{pg_server}/{name}"


def test_core_scenario_on_postgres(pg_url):
    store = Store(pg_url)
    try:
        exp = store.create_experiment(name="pg", spec=SPEC, warnings=["w"])
        other = store.create_experiment(name="other", spec=SPEC, warnings=[])
        assert store.get_experiment(exp.id) == exp
        assert exp.created_at.utcoffset().total_seconds() == 0

        assert store.transition(exp.id, "RUNNING", allowed_from={"QUEUED"})
        assert not store.transition(exp.id, "RUNNING", allowed_from={"QUEUED"})
        assert store.get_experiment(exp.id).started_at is not None
        assert [e.id for e in store.queued_in_order()] == [other.id]
        updated = store.update_experiment(exp.id, best={"metric_value": 1.5}, attempts=1)
        assert updated.best == {"metric_value": 1.5}
        assert updated.attempts == 1

        store.upsert_trial(exp.id, "t1", status="RUNNING", config={"lr": 0.1, "bad": float("nan")})
        store.upsert_trial(exp.id, "t1", status="TERMINATED", iterations=3, seed=2**40)
        store.upsert_trial(exp.id, "t2", status="ERROR", error="Traceback ...")
        t1 = store.get_trial(exp.id, "t1")
        assert t1.config == {"lr": 0.1, "bad": None}
        assert t1.iterations == 3
        assert t1.seed == 2**40
        assert store.trial_counts(exp.id) == {"TERMINATED": 1, "ERROR": 1}
        assert [t.trial_id for t in store.list_trials(exp.id)] == ["t1", "t2"]

        points = [MetricPoint(iteration=i, env_steps=i, values={"a": i, "b": 0}) for i in (1, 2)]
        store.add_metric_points(exp.id, "t1", points)
        store.add_metric_points(exp.id, "t1", [MetricPoint(iteration=2, values={"a": 20.0})])
        history = store.metric_history(exp.id, "t1")
        assert [(p.iteration, p.values) for p in history] == [(1, {"a": 1, "b": 0}), (2, {"a": 20})]
        assert store.metric_history(exp.id, "t1", keys=["b"])[0].values == {"b": 0}

        page, total = store.list_experiments(limit=1)
        assert total == 2
        assert page[0].id == other.id
        assert store.list_experiments(status="RUNNING")[1] == 1
        assert store.count_by_status({"QUEUED", "RUNNING"}) == 2

        assert store.delete_experiment(exp.id)
        assert store.get_experiment(exp.id) is None
        assert store.list_trials(exp.id) == []
        assert store.metric_history(exp.id, "t1") == []
        assert store.list_experiments() == ([store.get_experiment(other.id)], 1)
    finally:
        store.close()


def _open(url):
    Store(url).close()


def _race(url, experiment_id, barrier):
    store = Store(url)
    barrier.wait()
    for i in range(30):
        store.upsert_trial(experiment_id, f"t{i:02d}", status="RUNNING", iterations=i)
        store.add_metric_points(experiment_id, "t00", [MetricPoint(iteration=i, values={})])
    store.close()


def test_processes_migrate_and_write_concurrently(pg_url):
    ctx = multiprocessing.get_context("spawn")
    openers = [ctx.Process(target=_open, args=(pg_url,)) for _ in range(3)]
    for p in openers:
        p.start()
    for p in openers:
        p.join(timeout=120)
    assert [p.exitcode for p in openers] == [0, 0, 0]

    store = Store(pg_url)
    exp = store.create_experiment(name="race", spec=SPEC, warnings=[])
    barrier = ctx.Barrier(2)
    writers = [ctx.Process(target=_race, args=(pg_url, exp.id, barrier)) for _ in range(2)]
    for p in writers:
        p.start()
    for p in writers:
        p.join(timeout=120)
    assert [p.exitcode for p in writers] == [0, 0]
    assert len(store.list_trials(exp.id)) == 30
    assert [p.iteration for p in store.metric_history(exp.id, "t00")] == list(range(30))
    store.close()
