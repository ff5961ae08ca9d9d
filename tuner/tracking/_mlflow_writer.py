"""Writing to MLflow: an MlflowClient bound to one tracking URI (the process-global
`mlflow.set_tracking_uri` is never touched), batched within MLflow's per-request
limits, and a background thread for per-iteration metrics."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

from mlflow.entities import Metric, Param, RunStatus, RunTag
from mlflow.tracking import MlflowClient

# MLflow's own run statuses (neither a sweep's nor a trial's: tuner/statuses.py).
RUN_RUNNING = RunStatus.to_string(RunStatus.RUNNING)
RUN_FINISHED = RunStatus.to_string(RunStatus.FINISHED)
RUN_FAILED = RunStatus.to_string(RunStatus.FAILED)
RUN_KILLED = RunStatus.to_string(RunStatus.KILLED)

# MLflow's per-request limits for log_batch.
MAX_PARAMS, MAX_METRICS, MAX_TAGS = 100, 1000, 100
MAX_PARAM_CHARS = 6000


def param_value(value: Any) -> str:
    """A param as MLflow stores it (JSON for non-strings, cut to MLflow's limit)."""
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text[:MAX_PARAM_CHARS]


def open_store(tracking_uri: str) -> None:
    """Opens (and, for a new database, migrates) the tracking store of `tracking_uri`.

    Importing MLflow's SQL store takes seconds, and a new SQLite database seconds more
    (MLflow runs all its migrations). MLflow keeps one store per URI, built under a
    lock, so the first client made afterwards waits for this one and reuses it. An
    error is left for that client to raise.

    Args:
        tracking_uri: The MLflow tracking URI.
    """
    try:
        MlflowClient(tracking_uri=tracking_uri)
    except Exception:  # noqa: BLE001 - the first real client raises it
        pass


def open_in_background(tracking_uri: str) -> threading.Thread:
    """Starts `open_store` on a thread and returns it.

    Begun before a Ray start, it overlaps it. Join the thread before the process may exit
    (a migration in progress).

    Args:
        tracking_uri: The MLflow tracking URI.

    Returns:
        The thread.
    """
    thread = threading.Thread(
        target=open_store, args=(tracking_uri,), name="tuner-mlflow-open", daemon=True
    )
    thread.start()
    return thread


def _chunks(items: list, size: int) -> list[list]:
    return [items[i : i + size] for i in range(0, len(items), size)]


class RunWriter:
    """The MLflow client of one tracking URI, with batched logging."""

    def __init__(self, tracking_uri: str) -> None:
        self.client = MlflowClient(tracking_uri=tracking_uri)
        self._background: _BackgroundWriter | None = None

    def log(
        self,
        run_id: str,
        *,
        params: dict[str, Any] | None = None,
        metrics: list[Metric] | None = None,
        tags: dict[str, str] | None = None,
    ) -> None:
        """log_batch within MLflow's per-request limits."""
        plist = [Param(k, param_value(v)) for k, v in (params or {}).items()]
        for chunk in _chunks(plist, MAX_PARAMS):
            self.client.log_batch(run_id, params=chunk)
        for chunk in _chunks(list(metrics or []), MAX_METRICS):
            self.client.log_batch(run_id, metrics=chunk)
        tlist = [RunTag(k, v) for k, v in (tags or {}).items()]
        for chunk in _chunks(tlist, MAX_TAGS):
            self.client.log_batch(run_id, tags=chunk)

    def submit(self, job: Callable[[], None]) -> None:
        """Runs `job` on the background thread (in order; made on first use)."""
        if self._background is None:
            self._background = _BackgroundWriter()
        self._background.submit(job)

    def flush(self) -> None:
        """Waits until every queued job has run."""
        if self._background is not None:
            self._background.flush()


class _BackgroundWriter:
    """One daemon thread running logging calls in order; `flush` waits for the queue."""

    def __init__(self) -> None:
        import queue
        import threading

        self._queue: queue.Queue = queue.Queue()
        threading.Thread(target=self._run, name="mlflow-writer", daemon=True).start()

    def _run(self) -> None:
        import logging

        while True:
            job = self._queue.get()
            try:
                job()
            except Exception:  # noqa: BLE001 - a lost batch must not end the sweep
                logging.getLogger("tuner.mlflow").exception("MLflow logging failed")
            finally:
                self._queue.task_done()

    def submit(self, job: Callable[[], None]) -> None:
        """Queues a call."""
        self._queue.put(job)

    def flush(self) -> None:
        """Returns once every queued call has run."""
        self._queue.join()
