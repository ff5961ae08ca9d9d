"""Tune callback that writes trial status and metric points into the service's store,
and the callback (with its stopper) that ends the sweep gracefully when the API asks."""

from __future__ import annotations

import math
import os
import signal
import time
from pathlib import Path
from typing import Any

from ray.tune import Callback
from ray.tune.result import SHOULD_CHECKPOINT
from ray.tune.stopper import Stopper

from tuner.trials._mlflow import result_metrics
from tuner.trials._summary import better
from tuner.trials._tuner import sampled_values


class StoreRecorder(Callback):
    """Trial rows (status, sampled values, progress, node) and per-iteration metrics.

    Only plain data as attributes; the store connection is opened lazily in the
    driver and left out of Tune's pickled state.
    """

    def __init__(
        self,
        store_url: str,
        experiment_id: str,
        metric: str,
        mode: str,
        space_keys: list[str],
        base_seed: int,
    ) -> None:
        self.store_url = store_url
        self.experiment_id = experiment_id
        self.metric = metric
        self.mode = mode
        self.space_keys = list(space_keys)
        self.base_seed = base_seed
        self.best: dict[str, float] = {}
        self._store: Any = None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_store"] = None
        return state

    @property
    def store(self) -> Any:
        """The store (opened on first use)."""
        if self._store is None:
            from tuner.store import Store

            self._store = Store(self.store_url)
        return self._store

    def _upsert(self, trial: Any, **fields: Any) -> None:
        self.store.upsert_trial(self.experiment_id, trial.trial_id, **fields)

    def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        from tuner.trials._algorithms import trial_index, trial_seed

        self._upsert(
            trial,
            status="RUNNING",
            config=sampled_values(trial.config, self.space_keys),
            seed=trial_seed(self.base_seed, trial_index(trial.trial_id)),
        )

    def on_trial_result(
        self, iteration: int, trials: list, trial: Any, result: dict, **info: Any
    ) -> None:
        from tuner.store import MetricPoint

        metrics = result_metrics(result, (self.metric,))
        value = metrics.get(self.metric)
        if trial.trial_id not in self.best:
            stored = self.store.get_trial(self.experiment_id, trial.trial_id)
            if stored and stored.best_metric is not None:
                self.best[trial.trial_id] = stored.best_metric
        if value is not None and better(value, self.best.get(trial.trial_id), self.mode):
            self.best[trial.trial_id] = value
        it = int(result.get("training_iteration") or 0)
        steps = int(result.get("num_env_steps_sampled_lifetime") or 0)
        extra = result.get("tuner") or {}
        self._upsert(
            trial,
            status="RUNNING",
            iterations=it,
            env_steps=steps,
            metric=value,
            best_metric=self.best.get(trial.trial_id),
            node_ip=result.get("node_ip"),
            node_id=extra.get("node_id"),
            device=extra.get("device"),
        )
        self.store.add_metric_points(
            self.experiment_id,
            trial.trial_id,
            [
                MetricPoint(
                    iteration=it,
                    env_steps=steps,
                    time_s=float(result.get("time_total_s") or 0.0),
                    values={k: v for k, v in metrics.items() if math.isfinite(v)},
                )
            ],
        )

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._upsert(trial, status="TERMINATED")

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        text = "error"
        if trial.error_file and Path(trial.error_file).exists():
            text = Path(trial.error_file).read_text().strip()
        self._upsert(trial, status="ERROR", error=text[-4000:])


# Sweeps whose GracefulStop decided to end the run now (read by StopRequested.stop_all).
_INTERRUPTED: set[str] = set()


class GracefulStop(Callback):
    """Ends the sweep once the API set `stop_requested`, without losing work.

    First every running trial that has trained is made to save a checkpoint at its next
    result (Tune's `should_checkpoint`), whatever `checkpoint.frequency` says; once each
    has one (or `grace_s` passed, or it ended), the driver sends itself SIGUSR1, which
    Tune handles like Ctrl-C: the experiment state is saved and unfinished trials stay
    resumable, each from the checkpoint it just wrote.
    """

    def __init__(
        self, store_url: str, experiment_id: str, grace_s: float = 30.0, poll_s: float = 1.0
    ) -> None:
        self.store_url = store_url
        self.experiment_id = experiment_id
        self.grace_s = grace_s
        self.poll_s = poll_s
        self.draining = False
        self.interrupted = False
        self.pending: set[str] = set()
        self.deadline = 0.0
        self._checked_at = 0.0
        self._store: Any = None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.update(draining=False, interrupted=False, pending=set(), _store=None)
        return state

    def setup(self, **info: Any) -> None:
        """A fresh run (or resume) of this sweep in this process starts uninterrupted."""
        _INTERRUPTED.discard(self.experiment_id)

    def _requested(self) -> bool:
        now = time.monotonic()
        if now - self._checked_at < self.poll_s:
            return False
        self._checked_at = now
        if self._store is None:
            from tuner.store import Store

            self._store = Store(self.store_url)
        rec = self._store.get_experiment(self.experiment_id)
        return rec is None or rec.stop_requested

    def on_step_begin(self, iteration: int, trials: list, **info: Any) -> None:
        if self.interrupted:
            return
        if not self.draining:
            if not self._requested():
                return
            self.draining = True
            self.deadline = time.monotonic() + self.grace_s
            self.pending = {
                t.trial_id
                for t in trials
                if t.status == "RUNNING" and (t.last_result or {}).get("training_iteration")
            }
        if not self.pending or time.monotonic() > self.deadline:
            self.interrupt()

    def on_trial_result(
        self, iteration: int, trials: list, trial: Any, result: dict, **info: Any
    ) -> None:
        if self.draining and not self.interrupted and trial.trial_id in self.pending:
            result[SHOULD_CHECKPOINT] = True  # Tune saves right after this result

    def on_checkpoint(
        self, iteration: int, trials: list, trial: Any, checkpoint: Any, **info: Any
    ) -> None:
        self.pending.discard(trial.trial_id)

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self.pending.discard(trial.trial_id)

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self.pending.discard(trial.trial_id)

    def interrupt(self) -> None:
        """Ends the run now (Tune's SIGUSR1 handler, else StopRequested.stop_all)."""
        self.interrupted = True
        _INTERRUPTED.add(self.experiment_id)
        if callable(signal.getsignal(signal.SIGUSR1)):  # Tune's own (never the default)
            os.kill(os.getpid(), signal.SIGUSR1)


class StopRequested(Stopper):
    """Where Tune's SIGUSR1 handler is not installed (not the main thread), ends the run
    once GracefulStop decided to: `stop_all` then returns True."""

    def __init__(self, store_url: str, experiment_id: str) -> None:
        self.store_url = store_url  # kept for Tune states pickled by earlier versions
        self.experiment_id = experiment_id

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        return False  # a stopped trial would be TERMINATED, and never resumed

    def stop_all(self) -> bool:
        return self.experiment_id in _INTERRUPTED and not callable(signal.getsignal(signal.SIGUSR1))
