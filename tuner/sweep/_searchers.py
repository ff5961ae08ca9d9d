"""The sweep's Optuna searchers: Tune's OptunaSearch told the score the sweep ranks a
trial by (TunerOptunaSearch), and the same racing each config over seeds
(RacingOptunaSearch, search.race; its state in tuner.sweep._race)."""

from __future__ import annotations

import math
import numbers
import warnings
from typing import Any

from ray.tune.search import Searcher
from ray.tune.search.optuna import OptunaSearch

from tuner.mlflow_names import ITERATION_KEY, STEP_KEY
from tuner.ray_internals import optuna_forget, optuna_told
from tuner.rllib import INDEX_KEY
from tuner.sweep._race import Race, RaceEntry, mean_of
from tuner.tracking import Ranking

# Optuna warns that a list choice (an epsilon schedule, a layer list) cannot go to
# persistent storage; the sweep's study lives in memory, so the warning says nothing
# true of a sweep and only fills its log (one line per such choice).
_LIST_CHOICE_WARNING = "Choices for a categorical distribution should be a tuple"


def _finite(value: Any) -> bool:
    return isinstance(value, numbers.Real) and math.isfinite(value)


class TunerOptunaSearch(OptunaSearch):
    """Tune's OptunaSearch, told only the results that carry the metric, and at a
    trial's end the score the sweep ranks it by.

    Tune's own raises a KeyError (and ends the sweep) on an intermediate result without
    the metric: an evaluation metric exists only on the iterations that evaluate
    (`evaluation.at_end`: the last one). A trial whose final result lacks it is told to
    Optuna as pruned, as Tune's does. Where the sweep ranks trials by their final
    deterministic evaluation (`ranking.final_key`), the study is told that score at a
    trial's end, the number the ranking, the confirmation and a warm start use; a trial
    stopped before its budget (no such score) is told as pruned, its training returns
    reported along the way placing it among the pruned."""

    def __init__(
        self,
        *args: Any,
        known: list[tuple[dict[str, Any], float]] | None = None,
        objectives: list[tuple[str, str]] | None = None,
        ranking: Ranking | None = None,
        intermediate: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        # what every iteration reports where the metric comes only at the end (a final
        # evaluation): told as the intermediate values (tuner.spec.scheduler_metric)
        self.tuner_intermediate = intermediate
        # a warm start's earlier (point, score) pairs, told once the space is known
        self.tuner_known = list(known or [])
        # several (metric, mode): the study is multi-objective, Tune ranks by the first
        self.tuner_objectives = list(objectives or [])
        # where trials are ranked by a final evaluation: what a trial's end is told
        budget = ranking is not None and (ranking.budget_steps or ranking.budget_iterations)
        self.tuner_ranking = ranking if budget and ranking.final_key else None

    @staticmethod
    def convert_search_space(spec: dict[str, Any]) -> dict[str, Any]:
        """Tune's conversion of the space to Optuna's distributions (the only place they
        are made), without Optuna's warning about list choices (_LIST_CHOICE_WARNING).

        Args:
            spec: Tune's search space.

        Returns:
            Optuna's distribution for each flattened key.
        """
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", _LIST_CHOICE_WARNING, UserWarning)
            return OptunaSearch.convert_search_space(spec)

    def suggest(self, trial_id: str) -> dict[str, Any] | None:
        """Tune's, with the trial's 0-based index in the order of suggestion (INDEX_KEY):
        its seed is the spec's seed plus that index, the same on every run of the spec
        (a searcher's trial id is random).

        Args:
            trial_id: Tune's trial id.

        Returns:
            The trial's values and index, or what Tune's returns instead of values.
        """
        config = super().suggest(trial_id)
        if not isinstance(config, dict):
            return config
        # a searcher pickled before the index was kept has none yet
        indices = self.__dict__.setdefault("tuner_indices", {})
        if trial_id not in indices:
            indices[trial_id] = len(indices)
        return {**config, INDEX_KEY: indices[trial_id]}

    def on_trial_result(self, trial_id: str, result: dict[str, Any]) -> None:
        # a multi-objective study takes no intermediate values (Tune's returns on them)
        if isinstance(self.metric, list):
            return
        every = getattr(self, "tuner_intermediate", None)
        if self.metric not in result and every and every in result:
            result = {**result, self.metric: result[every]}
        if self.metric in result:
            super().on_trial_result(trial_id, result)

    def on_trial_complete(
        self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False
    ) -> None:
        """Tune's; a multi-objective result missing one objective's value is told as
        pruned (Tune's would tell Optuna a None among the values, which it refuses)."""
        if isinstance(self.metric, list) and result is not None:
            if not all(_finite(result.get(m)) for m in self.metric):
                result = None  # Optuna refuses None and NaN among the values
        if result is not None and not isinstance(self.metric, list):
            score = self.tuner_score(result)
            # the score under the metric's name (Tune's reads it there); None: pruned
            result = None if score is None else {**result, self.metric: score}
        super().on_trial_complete(trial_id, result, error)

    def tuner_score(self, result: dict[str, Any] | None) -> float | None:
        """The score a trial's last result gives it: its final evaluation where trials
        are ranked by it (None for a trial stopped short of its budget), else the
        metric's value (None where it has none).

        Args:
            result: The trial's last result (None: it failed).

        Returns:
            The score, or None.
        """
        if result is None:
            return None
        # getattr: a searcher pickled before the ranking was kept has no such attribute
        ranking = getattr(self, "tuner_ranking", None)
        if ranking is not None:
            point = (int(result.get(ITERATION_KEY) or 0), int(result.get(STEP_KEY) or 0), result)
            return ranking.of_curve([point])["score"]
        value = result.get(self.metric)
        return float(value) if _finite(value) else None

    def set_search_properties(
        self, metric: str | None, mode: str | None, config: dict, **spec: Any
    ) -> bool:
        """Tune's (with every objective where there are several: Tune passes the first),
        then the warm start's earlier trials told to the study as completed."""
        # getattr: a searcher pickled before objectives existed has no such attribute
        objectives = getattr(self, "tuner_objectives", [])
        if objectives:
            metric = [m for m, _ in objectives]  # type: ignore[assignment]
            mode = [m for _, m in objectives]  # type: ignore[assignment]
        done = super().set_search_properties(metric, mode, config, **spec)
        if done:
            for point, score in self.tuner_known:
                self.add_evaluated_point(point, score)
            self.tuner_known = []
        return done


class RacingOptunaSearch(TunerOptunaSearch):
    """TunerOptunaSearch racing each config over `race_seeds` seeds (module docstring).

    A trial's index (INDEX_KEY, its seed: spec seed + index) is its seed index within
    its config. Optuna knows a config by its first trial; it is told the config's mean
    score once its race ends (None, pruned: a seed failed, or, ranked by the final
    evaluation, was stopped before its budget). A seed's score is the sweep's
    (`race_ranking`, as the summary scores it: the final evaluation, else the metric
    under scope over the seed's whole curve)."""

    # draws of a config already racing before one is taken as that config's next seed
    REDRAWS = 20

    def __init__(
        self, *args: Any, race_seeds: int, race_ranking: Ranking | None = None, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.tuner_race = Race(seeds=race_seeds, mode=kwargs.get("mode") or "max")
        self.race_ranking = race_ranking
        # trial id -> {iteration: (env steps, the ranking's values reported then)}
        self.race_curves: dict[str, dict[int, tuple[int, dict[str, float]]]] = {}

    def set_search_properties(
        self, metric: str | None, mode: str | None, config: dict, **spec: Any
    ) -> bool:
        """TunerOptunaSearch's; the race ranks by the sweep's mode."""
        done = super().set_search_properties(metric, mode, config, **spec)
        if done and mode:
            self.tuner_race.mode = mode
        return done

    def suggest(self, trial_id: str) -> dict[str, Any] | None:
        """A due config's next seed, else Optuna's next config on the first seed.

        Args:
            trial_id: Tune's trial id.

        Returns:
            The trial's values and seed index, or what Optuna's search returns instead.
        """
        race = self.tuner_race
        if trial_id in race.trials:  # asked again for the same trial (a restore)
            index, seed_index = race.trials[trial_id]
            return {**race.entries[index].config, INDEX_KEY: seed_index}
        due, ended = race.due()
        for entry in ended:
            self._tell(entry)
        if due is not None:
            return {**race.entries[due].config, INDEX_KEY: race.start(trial_id, due)}
        for _ in range(self.REDRAWS):
            config = super().suggest(trial_id)
            if not isinstance(config, dict):
                return config
            values = {k: v for k, v in config.items() if k != INDEX_KEY}
            if race.entry_of(values) is None:
                race.entries.append(RaceEntry(config=values, first=trial_id))
                race.trials[trial_id] = (len(race.entries) - 1, 0)
                return {**values, INDEX_KEY: 0}
            # a config already in the race: Optuna is told what that config scored so
            # far (nothing yet: failed), and draws again
            known = race.entries[race.entry_of(values) or 0].finished()
            value = mean_of(known) if known else None
            OptunaSearch.on_trial_complete(
                self, trial_id, {self.metric: value} if known else None, error=not known
            )
            optuna_forget(self, trial_id)
        # every draw repeats a config: run that config's next seed if it has one left
        index = race.entry_of(values)
        assert index is not None
        entry = race.entries[index]
        if not entry.running and len(entry.scores) < race.seeds:
            entry.ended = False
            return {**entry.config, INDEX_KEY: race.start(trial_id, index)}
        # nothing new to draw: done once nothing runs (a later end may make a seed due)
        return None if any(e.running for e in race.entries) else Searcher.FINISHED

    def on_trial_result(self, trial_id: str, result: dict[str, Any]) -> None:
        ranking = getattr(self, "race_ranking", None)
        if ranking is not None and trial_id in self.tuner_race.trials:
            self._race_point(trial_id, result)
        # Optuna's trial is the config's first seed's: later seeds report nothing to it
        if self.tuner_race.trials.get(trial_id, (0, 0))[1] == 0:
            super().on_trial_result(trial_id, result)

    def race_score(self, trial_id: str, result: dict[str, Any] | None) -> float | None:
        """A seed's score as the sweep's summary scores it (its whole curve under the
        sweep's ranking); without the ranking, TunerOptunaSearch's."""
        ranking = getattr(self, "race_ranking", None)
        if result is None:
            return None
        if ranking is None:
            return self.tuner_score(result)
        # Tune hands the result it stops a trial on (at its budget: the one with the final
        # evaluation) to on_trial_complete only, never to on_trial_result: it ends the curve
        self._race_point(trial_id, result)
        curve = self.race_curves.get(trial_id, {})
        points = [(i, steps, values) for i, (steps, values) in sorted(curve.items())]
        return ranking.of_curve(points)["score"]

    def _race_point(self, trial_id: str, result: dict[str, Any]) -> None:
        """A result's ranking values as the point of its iteration on the trial's curve
        (a point at that iteration or later, from before a retry, is dropped)."""
        values = {}
        for key in self.race_ranking.keys:
            value = result.get(key)
            if _finite(value):
                values[key] = float(value)
        iteration = int(result.get(ITERATION_KEY) or 0)
        curve = self.race_curves.setdefault(trial_id, {})
        for later in [i for i in curve if i >= iteration]:  # retried from a checkpoint
            del curve[later]
        curve[iteration] = (int(result.get(STEP_KEY) or 0), values)

    def on_trial_complete(
        self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False
    ) -> None:
        """The trial's score into the race; where the race of its config ends, Optuna
        is told the config's mean over its seeds."""
        race = self.tuner_race
        if trial_id not in race.trials:
            super().on_trial_complete(trial_id, result, error)
            return
        ended = race.finish(trial_id, None if error else self.race_score(trial_id, result))
        self.race_curves.pop(trial_id, None)
        if ended is not None:
            self._tell(ended, error)

    def _tell(self, entry: RaceEntry, error: bool = False) -> None:
        """Optuna is told a config's mean over its seeds (pruned: one of them has no
        score), once: the config's race has ended."""
        if optuna_told(self, entry.first):
            return
        scores = entry.finished()
        told = None
        if len(scores) == len(entry.scores) and scores:
            told = {self.metric: mean_of(scores)}
        OptunaSearch.on_trial_complete(self, entry.first, told, error and told is None)
