"""Racing each config over seeds during the search (`search.race`).

A config's instances are its trials on seeds seed, seed+1, ... (the same seeds for every
config, so their first instances compare on one seed). A config runs its next seed only
while the mean of its scores so far is at least the best fully raced config's mean
(every seed run), or, before any config is fully raced, the best mean over the same
seeds among the configs that ran them; a config that wins by a lucky seed meets its
other seeds before it can be confirmed, and one whose first seed trails the best first
seed does not spend the search's trials on its others while no race has finished.
The searcher (RacingOptunaSearch) runs a due config's next seed before it asks Optuna
for a new one, and tells Optuna a config's mean once its race ends.

The search's ranking (`tuner.seed_stats.race_groups`) orders configs by how many seeds
they ran without a failure, then by their mean: a config with fewer seeds than the
race's survivors is not ranked above them (SMAC's incumbent rule).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


def mean_of(scores: list[float]) -> float:
    """The mean of scores (at least one)."""
    return sum(scores) / len(scores)


def _at_least(value: float, reference: float, mode: str) -> bool:
    return value >= reference if mode == "max" else value <= reference


@dataclass
class RaceEntry:
    """One config in the race.

    The values Optuna suggested, the trial Optuna knows it by, its seeds' scores in
    order (None: a trial stopped early or failed)."""

    config: dict[str, Any]
    first: str
    scores: list[float | None] = field(default_factory=list)
    running: bool = True
    ended: bool = False

    def finished(self) -> list[float]:
        """Its scores, each finite (a None ends the race: only finite ones are kept)."""
        return [s for s in self.scores if s is not None]


@dataclass
class Race:
    """The searcher's race state.

    Every config's entry, and each trial's (entry, seed index)."""

    seeds: int
    mode: str
    entries: list[RaceEntry] = field(default_factory=list)
    trials: dict[str, tuple[int, int]] = field(default_factory=dict)

    def reference(self, skip: int, ran: int = 1) -> float | None:
        """The best mean among the configs that ran every seed (`skip`: the one judged);
        where none has, the best mean over the first `ran` seeds among the configs that
        ran them all (the same seeds as the one judged); None where no config has."""
        others = [e for i, e in enumerate(self.entries) if i != skip]
        means = [mean_of(e.finished()) for e in others if len(e.finished()) == self.seeds]
        if not means:
            means = [
                mean_of(e.finished()[:ran])
                for e in others
                if len(e.scores) >= ran and all(s is not None for s in e.scores[:ran])
            ]
        if not means:
            return None
        return max(means) if self.mode == "max" else min(means)

    def keeps_racing(self, index: int) -> bool:
        """Whether entry `index` runs its next seed: every score so far finite, seeds
        left, and its mean at least the reference over as many seeds (none yet: it races
        on)."""
        entry = self.entries[index]
        if any(s is None for s in entry.scores) or len(entry.scores) >= self.seeds:
            return False
        reference = self.reference(index, len(entry.scores))
        return reference is None or _at_least(mean_of(entry.finished()), reference, self.mode)

    def due(self) -> tuple[int | None, list[RaceEntry]]:
        """The entry whose next seed runs next, and the entries whose races end now.

        Of the entries still racing and not running, each is judged again against the
        reference as it is now (a config that kept up when its seed ended may trail a
        config raced since): those that trail end; of the rest, the best mean runs next.

        Returns:
            (its index, or None where none is due; the entries that ended).
        """
        ended = []
        due = []
        for i, e in enumerate(self.entries):
            if e.ended or e.running:
                continue
            if self.keeps_racing(i):
                due.append(i)
            else:
                e.ended = True
                ended.append(e)
        if not due:
            return None, ended
        sign = 1 if self.mode == "max" else -1
        best = max(due, key=lambda i: (sign * mean_of(self.entries[i].finished()), -i))
        return best, ended

    def start(self, trial_id: str, index: int) -> int:
        """Trial `trial_id` runs entry `index`'s next seed: its seed index."""
        entry = self.entries[index]
        entry.running = True
        self.trials[trial_id] = (index, len(entry.scores))
        return len(entry.scores)

    def finish(self, trial_id: str, score: float | None) -> RaceEntry | None:
        """A trial's score at its seed's place; the entry whose race it ends (to tell
        Optuna), else None. A seed that ends again (an errored trial resumed) replaces
        its score; an entry whose race has ended is not told again."""
        index, seed_index = self.trials[trial_id]
        entry = self.entries[index]
        entry.running = False
        if seed_index < len(entry.scores):
            entry.scores[seed_index] = score
        else:
            entry.scores.append(score)
        if entry.ended or self.keeps_racing(index):
            return None
        entry.ended = True
        return entry

    def entry_of(self, config: dict[str, Any]) -> int | None:
        """The entry that races `config` already (Optuna may draw a config twice from a
        space of choices), else None."""
        return next((i for i, e in enumerate(self.entries) if e.config == config), None)
