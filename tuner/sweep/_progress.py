"""Live progress of a sweep in the terminal: a rich table of trials."""

from __future__ import annotations

import math
from typing import Any

from ray.tune import Callback
from rich.console import Console
from rich.live import Live
from rich.table import Table

from tuner.mlflow_names import ITERATION_KEY, PER_ID_METRICS, STEP_KEY
from tuner.results import lookup
from tuner.statuses import TrialStatus

PER_ID_GROUPS = [[group.split("/")[-1]] for group in PER_ID_METRICS]


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.4g}"
    return str(value)


def metric_column(metric: str) -> str:
    """The metric's column title: its last part ('episode_return_mean'), with its group
    for one agent's or policy's return ('agent_episode_returns_mean/cart_0')."""
    parts = metric.split("/")
    return "/".join(parts[-2:]) if parts[-2:-1] in PER_ID_GROUPS else parts[-1]


class RichProgress(Callback):
    """Shows status, iteration, env steps, return and sampled values of every trial."""

    def __init__(self, metric: str, space_keys: list[str], stderr: bool = False) -> None:
        self.metric = metric
        self.space_keys = space_keys
        self.stderr = stderr
        self.rows: dict[str, dict[str, Any]] = {}
        self._live: Live | None = None

    def __getstate__(self) -> dict[str, Any]:
        # Tune pickles callbacks into its experiment state: leave the terminal out.
        state = self.__dict__.copy()
        state["_live"] = None
        return state

    def _row(self, trial: Any) -> dict[str, Any]:
        from tuner.sweep._tuner import sampled_values

        if trial.trial_id not in self.rows:
            self.rows[trial.trial_id] = {
                "status": trial.status,
                "iter": 0,
                "steps": 0,
                "metric": None,
                "sampled": sampled_values(trial.config, self.space_keys),
            }
        return self.rows[trial.trial_id]

    def _table(self) -> Table:
        table = Table(title="trials", expand=False)
        for col in ("trial", "status", "iter", "env steps", metric_column(self.metric)):
            table.add_column(col, justify="right" if col != "trial" else "left")
        for key in self.space_keys:
            table.add_column(key, justify="right")
        for trial_id, row in sorted(self.rows.items()):
            table.add_row(
                trial_id,
                row["status"],
                str(row["iter"]),
                str(row["steps"]),
                _fmt(row["metric"]) if row["metric"] is not None else "-",
                *(_fmt(row["sampled"].get(k)) for k in self.space_keys),
            )
        return table

    def _refresh(self) -> None:
        if self._live is None:
            self._live = Live(
                self._table(),
                console=Console(stderr=self.stderr),
                refresh_per_second=2,
                transient=False,
            )
            self._live.start()
        self._live.update(self._table())

    def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._row(trial)["status"] = TrialStatus.RUNNING
        self._refresh()

    def on_trial_result(
        self, iteration: int, trials: list, trial: Any, result: dict, **info: Any
    ) -> None:
        row = self._row(trial)
        row.update(
            status=TrialStatus.RUNNING,
            iter=result.get(ITERATION_KEY, 0),
            steps=int(result.get(STEP_KEY) or 0),
            metric=lookup(result, self.metric),
        )
        self._refresh()

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._row(trial)["status"] = TrialStatus.TERMINATED
        self._refresh()

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._row(trial)["status"] = TrialStatus.ERROR
        self._refresh()

    def on_experiment_end(self, trials: list, **info: Any) -> None:
        for trial in trials:
            row = self._row(trial)
            row["status"] = trial.status
            last = trial.last_result or {}
            if last.get(ITERATION_KEY, 0) > row["iter"]:  # finished before a resume
                row.update(
                    iter=last[ITERATION_KEY],
                    steps=int(last.get(STEP_KEY) or 0),
                    metric=lookup(last, self.metric),
                )
        if self._live is not None:
            self._live.update(self._table())
            self._live.stop()
            self._live = None
