"""Tune callback that writes trial status and metric points into the service's store,
and a stopper that ends the sweep gracefully when the API asks for it."""

from __future__ import annotations

import math
import os
import signal
import time
from pathlib import Path
from typing import Any

from ray.tune import Callback
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


class StopRequested(Stopper):
    """Ends the sweep once the API set `stop_requested`, the way Ctrl-C does: the driver
    sends itself SIGUSR1, which Tune handles by saving the experiment state and ending
    the run with unfinished trials resumable (each from its last checkpoint). If Tune's
    handler is not installed (not the main thread), `stop_all` ends the run instead.
    """

    def __init__(self, store_url: str, experiment_id: str, poll_s: float = 1.0) -> None:
        self.store_url = store_url
        self.experiment_id = experiment_id
        self.poll_s = poll_s
        self.requested = False
        self.via_signal = False
        self._checked_at = 0.0
        self._store: Any = None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_store"] = None
        state["requested"] = False
        return state

    def _poll(self) -> bool:
        now = time.monotonic()
        if self.requested or now - self._checked_at < self.poll_s:
            return self.requested
        self._checked_at = now
        if self._store is None:
            from tuner.store import Store

            self._store = Store(self.store_url)
        rec = self._store.get_experiment(self.experiment_id)
        if rec is None or rec.stop_requested:
            self.requested = True
            self.via_signal = callable(signal.getsignal(signal.SIGUSR1))
            if self.via_signal:  # Tune's own handler (never the default, which kills)
                os.kill(os.getpid(), signal.SIGUSR1)
        return self.requested

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        self._poll()
        return False  # a stopped trial would be TERMINATED, and never resumed

    def stop_all(self) -> bool:
        return self._poll() and signal.getsignal(signal.SIGUSR1) in (
            signal.SIG_DFL,
            signal.SIG_IGN,
            None,
        )
