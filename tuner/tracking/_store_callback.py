"""Tune callback that writes trial status and metric points into the service's store."""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from typing import Any

from ray.tune import Callback

from tuner.importance import sweep_importance
from tuner.mlflow_names import ITERATION_KEY, STAGE_SEARCH, STEP_KEY
from tuner.results import better, retries_of
from tuner.rllib import sampled_values, seed_of, stage_of
from tuner.statuses import TrialStatus
from tuner.tracking._mlflow_metrics import result_metrics
from tuner.tracking._trial_errors import error_text


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
        space: Mapping[str, Any] | None = None,
    ) -> None:
        self.store_url = store_url
        self.experiment_id = experiment_id
        self.metric = metric
        self.mode = mode
        self.space_keys = list(space_keys)
        self.base_seed = base_seed
        # the domains, as written (plain data), for the live hyperparameter importance
        self.space = {
            k: d.model_dump() if hasattr(d, "model_dump") else d for k, d in (space or {}).items()
        }
        self.best: dict[str, float] = {}
        self.last: dict[str, float] = {}
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
        self._upsert(
            trial,
            status=TrialStatus.RUNNING,
            config=sampled_values(trial.config, self.space_keys),
            seed=seed_of(trial.config, trial.trial_id, self.base_seed),
            stage=stage_of(trial.config),
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
            if stored and stored.metric is not None:
                self.last[trial.trial_id] = stored.metric
        if value is not None:
            self.last[trial.trial_id] = value  # an iteration with no episode keeps the last
            if better(value, self.best.get(trial.trial_id), self.mode):
                self.best[trial.trial_id] = value
        it = int(result.get(ITERATION_KEY) or 0)
        steps = int(result.get(STEP_KEY) or 0)
        extra = result.get("tuner") or {}
        self._upsert(
            trial,
            status=TrialStatus.RUNNING,
            iterations=it,
            env_steps=steps,
            metric=self.last.get(trial.trial_id),
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
        self._upsert(trial, status=TrialStatus.TERMINATED)
        if stage_of(trial.config) == STAGE_SEARCH:
            self._update_importance()

    def _update_importance(self) -> None:
        """The sweep's hyperparameter importance over the search trials finished so far,
        by their best metric (the driver writes the final one, by score, at the end)."""
        space = getattr(self, "space", None)  # absent from Tune states pickled before it
        if not space:
            return
        try:
            fields = sweep_importance(
                self.store.list_trials(self.experiment_id), space, self.mode, value="best_metric"
            )
        except Exception as err:  # noqa: BLE001 - a live summary never fails the sweep
            print(f"hyperparameter importance not computed: {err!r}", file=sys.stderr)
            return
        if fields["importance"]:
            self.store.update_experiment(self.experiment_id, **fields)

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._upsert(
            trial,
            status=TrialStatus.ERROR,
            error=_error_text(trial),
            retries=retries_of(trial.num_failures, True),
        )

    def on_trial_recover(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        """A failed trial Tune restarts from its last checkpoint: PENDING until it runs
        again, its error and retry count kept."""
        self._upsert(
            trial,
            status=TrialStatus.PENDING,
            error=_error_text(trial),
            retries=retries_of(trial.num_failures, False),
        )


def _error_text(trial: Any) -> str:
    """The end of the errors Tune wrote for a trial, as the store keeps it."""
    return (error_text(trial) or "error")[-4000:]


__all__ = ["StoreRecorder"]
