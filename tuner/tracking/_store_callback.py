"""Tune callback that writes trial status and metric points into the service's store."""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ray.tune import Callback

from tuner.importance import sweep_importance
from tuner.mlflow_names import ITERATION_KEY, STAGE_SEARCH, STEP_KEY
from tuner.results import retries_of, scope_value, search_rank, training_metric
from tuner.rllib import derived_settings, rerun_config, sampled_values, seed_of, stage_of
from tuner.statuses import TrialStatus
from tuner.tracking._mlflow_metrics import result_metrics
from tuner.tracking._trial_errors import error_text

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Ranking:
    """How a trial's curve becomes the numbers the store shows beside it.

    As the sweep's summary computes them from Tune's history: the metric's last value
    (carried over iterations without it), its peak, the training episodes' metric under
    scope (`train_score`: for an `evaluation/...` metric, the key without
    `evaluation/`), the score trials are ranked by, and, with several objectives, each
    one's value under scope. Plain data: it travels pickled with the callback.

    Attributes:
        metric: The spec's metric.
        mode: max or min.
        scope: How trials are ranked (last, last-5-avg, ...).
        objectives: (metric, mode) of each objective, with several.
        final_key: tuner.sweep's final_score_key: the score is then the trial's final
            deterministic evaluation where it ran its budget; else the metric under
            scope.
        budget_steps: The trial's budget in env steps, if any.
        budget_iterations: The trial's budget in iterations, if any.
    """

    metric: str
    mode: str
    scope: str = "last-5-avg"
    objectives: tuple[tuple[str, str], ...] = ()
    final_key: str | None = None
    budget_steps: int | None = None
    budget_iterations: int | None = None

    @classmethod
    def of(cls, spec: Any, final_key: str | None = None) -> Ranking:
        """The ranking of a spec (tuner.spec.ExperimentSpec).

        Args:
            spec: The sweep's spec.
            final_key: tuner.sweep's final_score_key, where the spec has a final evaluation.

        Returns:
            The Ranking.
        """
        objectives = tuple((o.metric, o.mode) for o in spec.objectives or ())
        stop = spec.stop
        return cls(
            spec.metric,
            spec.mode,
            spec.scope,
            objectives,
            final_key,
            stop.timesteps_total,
            stop.training_iteration,
        )

    @property
    def keys(self) -> tuple[str, ...]:
        """The result keys a curve needs: the metric, each objective's, the final one."""
        named = [
            self.metric,
            training_metric(self.metric),
            *(m for m, _ in self.objectives),
            self.final_key,
        ]
        return tuple(dict.fromkeys(k for k in named if k))

    def of_curve(self, curve: Sequence[tuple[int, int, Mapping[str, float]]]) -> dict[str, Any]:
        """metric, best_metric, train_score, score (and values) from a trial's curve.

        Args:
            curve: (iteration, env steps, the values reported then), in iteration order.

        Returns:
            The numbers, by name.
        """
        values = [v for _, _, v in curve]
        carried = _carried(values, self.metric)
        scoped = scope_value(carried, self.scope, self.mode)
        trained = _carried(values, training_metric(self.metric))
        out: dict[str, Any] = {
            "metric": carried[-1] if carried else None,
            "best_metric": (max(carried) if self.mode == "max" else min(carried))
            if carried
            else None,
            "train_score": scope_value(trained, self.scope, self.mode),
            "score": scoped if self.final_key is None else self._final(curve),
        }
        if self.objectives:
            out["values"] = {
                m: scope_value(_carried(values, m), self.scope, mode) for m, mode in self.objectives
            }
        return out

    def _final(self, curve: Sequence[tuple[int, int, Mapping[str, float]]]) -> float | None:
        """The final evaluation in the last point, where the trial ran its budget."""
        if not curve or self.final_key is None:
            return None
        iteration, steps, values = curve[-1]
        ran = bool(self.budget_steps and steps >= self.budget_steps) or bool(
            self.budget_iterations and iteration >= self.budget_iterations
        )
        value = values.get(self.final_key)
        return float(value) if ran and value is not None and math.isfinite(value) else None


def _carried(curve: Sequence[Mapping[str, float]], key: str) -> list[float]:
    """A key's values over the curve, each iteration without one carrying the last."""
    out: list[float] = []
    for values in curve:
        value = values.get(key)
        if value is not None and math.isfinite(value):
            out.append(float(value))
        elif out:
            out.append(out[-1])
    return out


class StoreRecorder(Callback):
    """Records trials and their metrics in the store, as a Tune callback.

    Trial rows (status, sampled values, progress, node, scores) and per-iteration
    metrics; while the search runs, the sweep's best trial so far.

    A trial's numbers are computed from its whole curve as the store keeps it: a trial
    that a resume (or a retry) continues picks its earlier iterations up from the store,
    and iterations it trains again replace the old ones. Only plain data as attributes;
    the store connection is opened lazily in the driver and left out of Tune's pickled
    state, with the curves read back from it.

    Args:
        store_url: The store's URL.
        experiment_id: The sweep's id.
        metric: The spec's metric.
        mode: max or min.
        space: The search space, as its keys or its domains (the domains, as written,
            give the live hyperparameter importance).
        base_seed: The spec's seed.
        spec: The sweep's spec (tuner.spec.ExperimentSpec): the settings a best config is
            rerun with, and its ranking where none is given.
        ranking: How a trial's curve becomes its numbers; without it or `spec`, the
            metric under last-5-avg.
    """

    def __init__(
        self,
        store_url: str,
        experiment_id: str,
        metric: str,
        mode: str,
        space: Mapping[str, Any] | Sequence[str],
        base_seed: int,
        *,
        spec: Any = None,
        ranking: Ranking | None = None,
    ) -> None:
        self.store_url = store_url
        self.experiment_id = experiment_id
        self.metric = metric
        self.mode = mode
        # the search space's keys; its domains by key, as written (plain data), for the
        # live hyperparameter importance where `space` gives them
        self.space_keys = list(space)
        domains = space if isinstance(space, Mapping) else {}
        self.space = {
            k: d.model_dump() if hasattr(d, "model_dump") else d for k, d in domains.items()
        }
        self.base_seed = base_seed
        # the spec (tuner.spec.ExperimentSpec): the settings a best config is rerun with,
        # and its ranking where none is given; without either, the metric under last-5-avg
        self.spec = spec
        if ranking is None:
            ranking = Ranking.of(spec) if spec is not None else Ranking(metric, mode)
        self.ranking = ranking
        self._store: Any = None
        self._reset_caches()

    def _reset_caches(self) -> None:
        # trial id -> {iteration: (env steps, the ranking's values reported then)}
        self._curves: dict[str, dict[int, tuple[int, dict[str, float]]]] = {}
        # search trials' (score, train_score), of every attempt (None until read)
        self._scores: dict[str, tuple[float | None, float | None]] | None = None
        self._rows: dict[str, dict[str, Any]] = {}  # trial id -> {config, seed, tune}
        # search trials that ended (finished or failed for now): a raced config's seed
        # without a score then counts as stopped, as the summary counts it
        self._ended: set[str] = set()
        self._best_written: tuple[Any, ...] | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        for key in ("_store", "_curves", "_scores", "_rows", "_best_written", "_ended"):
            state.pop(key, None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._store = None
        if not hasattr(self, "ranking"):  # pickled by an older version
            self.spec = None
            self.ranking = Ranking(self.metric, self.mode)
        self._reset_caches()

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

    def _curve(self, trial_id: str) -> dict[int, tuple[int, dict[str, float]]]:
        """A trial's curve: read from the store the first time this driver sees it (its
        iterations of an earlier attempt), then kept up to date here."""
        if trial_id not in self._curves:
            points = self.store.metric_history(
                self.experiment_id, trial_id, keys=list(self.ranking.keys)
            )
            self._curves[trial_id] = {p.iteration: (p.env_steps, dict(p.values)) for p in points}
        return self._curves[trial_id]

    def on_trial_result(
        self, iteration: int, trials: list, trial: Any, result: dict, **info: Any
    ) -> None:
        from tuner.store import MetricPoint

        keys = self.ranking.keys
        metrics = result_metrics(result, keys)
        it = int(result.get(ITERATION_KEY) or 0)
        steps = int(result.get(STEP_KEY) or 0)
        curve = self._curve(trial.trial_id)
        # restored from an older checkpoint: the iterations after it are trained again
        for later in [i for i in curve if i > it]:
            del curve[later]
        reported = {k: metrics[k] for k in keys if k in metrics and math.isfinite(metrics[k])}
        curve[it] = (steps, reported)
        numbers = self.ranking.of_curve([(i, *curve[i]) for i in sorted(curve)])
        extra = result.get("tuner") or {}
        self._upsert(
            trial,
            status=TrialStatus.RUNNING,
            iterations=it,
            env_steps=steps,
            **numbers,
            node_ip=result.get("node_ip"),
            node_id=extra.get("node_id"),
            device=extra.get("device"),
            cpu=extra.get("cpu"),
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
        if stage_of(trial.config) == STAGE_SEARCH:
            try:
                self._note_score(trial, numbers["score"], numbers["train_score"])
            except Exception as err:  # noqa: BLE001 - a live summary never fails the sweep
                logger.warning("best trial so far not written: %r", err)

    def _note_score(self, trial: Any, score: float | None, train_score: float | None) -> None:
        """Keeps the sweep's best search trial so far in the store's `best` (what the page
        shows as "Best so far"): by score, or, while no trial has one (none has run its
        budget to its final evaluation yet), by the training metric under scope, as the
        summary falls back to it. The driver writes the final one at the end."""
        if self._scores is None:  # the trials of earlier attempts count too
            self._scores = {}
            for row in self.store.list_trials(self.experiment_id):
                if row.stage == STAGE_SEARCH:
                    self._scores[row.trial_id] = (row.score, row.train_score)
                    self._rows[row.trial_id] = {"config": row.config, "seed": row.seed}
                    if row.status in (TrialStatus.TERMINATED, TrialStatus.ERROR):
                        self._ended.add(row.trial_id)
        self._scores[trial.trial_id] = (score, train_score)
        self._rows[trial.trial_id] = {
            "config": sampled_values(trial.config, self.space_keys),
            "seed": seed_of(trial.config, trial.trial_id, self.base_seed),
            "tune": trial.config,
        }
        scored = any(s is not None for s, _ in self._scores.values())
        # the summary's fallback: the training metric, where scores are final evaluations
        by = 0 if scored or self.ranking.final_key is None else 1
        if by == 0 and self.spec is not None and self.spec.search.race is not None:
            self._note_race()
            return

        def rank(trial_id: str) -> tuple[Any, ...]:  # the summary's order (search_rank)
            score, train = self._scores[trial_id]
            seed = self._rows.get(trial_id, {}).get("seed")
            ranked = (score, train) if by == 0 else (train, None)
            return search_rank(*ranked, seed, trial_id, self.mode)

        valued = [tid for tid, values in self._scores.items() if _finite(values[by])]
        top = min(valued, key=rank, default=None)
        best = (top, self._scores[top][by]) if top is not None else None
        if best is None or best == self._best_written:
            return
        train = self._scores[best[0]][1]
        # by the training metric (no final evaluation yet): labelled with the spec's scope
        final = by == 0 and self.ranking.final_key is not None
        view = self._best_view(*best, train, final=final)
        self.store.update_experiment(self.experiment_id, best=view)
        self._best_written = best

    def _note_race(self) -> None:
        """A raced search's best so far (search.race), as the driver's summary ranks
        it: the race's first config over the seeds that have a score yet."""
        from tuner.seed_stats import race_groups, race_record
        from tuner.views import TrialView

        views = [
            TrialView(
                trial_id=tid,
                status=TrialStatus.TERMINATED,
                config=self._rows[tid]["config"],
                seed=self._rows[tid]["seed"],
                score=score,
                train_score=train,
            )
            for tid, (score, train) in sorted(self._scores.items())
            if (score is not None or tid in self._ended) and tid in self._rows
        ]
        top = next((g for g in race_groups(views, self.mode) if g.mean is not None), None)
        if top is None:
            return
        rep = top.representative
        key = (rep.trial_id, top.mean, len(top.trials))
        if key == self._best_written:
            return
        best = self._best_view(rep.trial_id, top.mean, rep.train_score)
        best["race"] = race_record(top, self.base_seed).model_dump(mode="json")
        self.store.update_experiment(self.experiment_id, best=best)
        self._best_written = key

    def _best_view(
        self, trial_id: str, score: float, train_score: float | None, final: bool = True
    ) -> dict[str, Any]:
        """A BestTrial (as JSON) of a search trial and its score so far; `final`: the score
        is a final evaluation where the ranking has one (else the metric under scope)."""
        from tuner.views import FINAL_SCOPE, BestTrial

        row = self._rows.get(trial_id, {})
        config = dict(row.get("config") or {})
        full, resources = dict(config), {}
        if self.spec is not None:
            derived: dict[str, Any] = {}
            if row.get("tune") is not None:
                derived, resources = derived_settings(row["tune"], self.spec)
            full = rerun_config(self.spec, derived, config)
        best = BestTrial(
            trial_id=trial_id,
            config=config,
            full_config=full,
            resources=resources,
            seed=row.get("seed"),
            metric_value=score,
            train_score=train_score,
            scope=FINAL_SCOPE if final and self.ranking.final_key else self.ranking.scope,
            checkpoint_trial_id=trial_id,
        )
        return best.model_dump(mode="json")

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._upsert(trial, status=TrialStatus.TERMINATED)
        if stage_of(trial.config) == STAGE_SEARCH:
            self._update_importance()
            self._race_seed_ended(trial)

    def _race_seed_ended(self, trial: Any) -> None:
        """A raced search's seed ended: without a score it now counts as stopped."""
        self._ended.add(trial.trial_id)
        raced = self.spec is not None and self.spec.search.race is not None
        if raced and self._scores is not None and trial.trial_id in self._scores:
            try:
                self._note_race()
            except Exception as err:  # noqa: BLE001 - a live summary never fails the sweep
                logger.warning("best trial so far not written: %r", err)

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
            logger.warning("hyperparameter importance not computed: %r", err)
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
        if stage_of(trial.config) == STAGE_SEARCH:
            self._race_seed_ended(trial)

    def on_trial_recover(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        """A failed trial Tune restarts from its last checkpoint: PENDING until it runs
        again, its error and retry count kept."""
        self._ended.discard(trial.trial_id)
        self._upsert(
            trial,
            status=TrialStatus.PENDING,
            error=_error_text(trial),
            retries=retries_of(trial.num_failures, False),
        )


def curve_numbers(store: Any, experiment_id: str, trial_id: str, ranking: Ranking) -> dict | None:
    """metric, best_metric, score (and values) of a trial from its curve in the store.

    The store's curve is the record of every result of every attempt.

    Args:
        store: The Store.
        experiment_id: The sweep's id.
        trial_id: Tune's trial id.
        ranking: How the curve becomes the numbers.

    Returns:
        The numbers; None where the store has no point of the trial.
    """
    points = store.metric_history(experiment_id, trial_id, keys=list(ranking.keys))
    if not points:
        return None
    return ranking.of_curve([(p.iteration, p.env_steps, p.values) for p in points])


def _error_text(trial: Any) -> str:
    """The errors Tune wrote for a trial (the store keeps their last lines)."""
    return error_text(trial) or "error"


def _finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


__all__ = ["Ranking", "StoreRecorder", "curve_numbers"]
