"""The MLflow store opened on a thread (overlapping the Ray start) is the one the
tracker's client then uses, and a failure is left for that client to raise."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest
from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

from tuner.tracking import open_in_background
from tuner.tracking._mlflow_writer import RunWriter


@pytest.fixture
def thread_errors(monkeypatch: pytest.MonkeyPatch) -> list[BaseException]:
    """Exceptions that escaped a thread (Python only prints them)."""
    found: list[BaseException] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: found.append(args.exc_value))
    return found


def test_the_store_opened_in_the_background_is_migrated_and_reused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, thread_errors: list[BaseException]
) -> None:
    built: list[str] = []
    init = SqlAlchemyStore.__init__

    def counting_init(self: SqlAlchemyStore, *args: object, **kwargs: object) -> None:
        built.append(threading.current_thread().name)
        init(self, *args, **kwargs)

    monkeypatch.setattr(SqlAlchemyStore, "__init__", counting_init)
    db = tmp_path / "mlflow.db"
    uri = f"sqlite:///{db}"
    thread = open_in_background(uri)
    thread.join(timeout=120)
    assert not thread.is_alive()
    assert thread_errors == []
    assert built == ["tuner-mlflow-open"]  # opened there, once
    with sqlite3.connect(db) as con:  # MLflow's migrated schema is there
        tables = {r[0] for r in con.execute("select name from sqlite_master where type='table'")}
    assert {"experiments", "runs", "metrics", "alembic_version"} <= tables
    writer = RunWriter(uri)
    assert built == ["tuner-mlflow-open"]  # the tracker's client reuses it
    exp = writer.client.create_experiment("e")
    assert writer.client.get_experiment(exp).name == "e"


def test_a_store_that_cannot_open_fails_in_the_caller_not_the_thread(
    tmp_path: Path, thread_errors: list[BaseException]
) -> None:
    (tmp_path / "file").write_text("not a directory")
    uri = f"sqlite:///{tmp_path / 'file' / 'mlflow.db'}"
    thread = open_in_background(uri)
    thread.join(timeout=120)
    assert not thread.is_alive()
    assert thread_errors == []  # nothing escaped the thread
    with pytest.raises(Exception, match="(?i)file exists|unable to open|directory"):
        RunWriter(uri)
