"""Racing each config over seeds during the search (`search.race`).

A config's instances are its trials on seeds seed, seed+1, ... (the same seeds for every
config, so their first instances compare on one seed). A config runs its next seed only
while the mean of its scores so far is at least the best fully raced config's mean
(every seed run); a config that wins by a lucky seed meets its other seeds before it can
be confirmed. Before any config is fully raced, a config whose mean trails the best mean
over the same seeds waits (it is judged against the first full race), so it does not
spend the search's trials on its other seeds while no race has finished.
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


NEXT, WAIT, END = "next", "wait", "end"  # Race.verdict


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

    def reference(self, skip: int) -> float | None:
        """The best mean among the configs that ran every seed (`skip`: the one judged)."""
        full = [
            mean_of(e.finished())
            for i, e in enumerate(self.entries)
            if i != skip and len(e.finished()) == self.seeds
        ]
        if not full:
            return None
        return max(full) if self.mode == "max" else min(full)

    def leader(self, skip: int, ran: int) -> float | None:
        """Where no config ran every seed: the best mean over the first `ran` seeds among
        the other configs that ran them (the same seeds as the one judged), else None."""
        means = [
            mean_of(e.finished()[:ran])
            for i, e in enumerate(self.entries)
            if i != skip and len(e.scores) >= ran >= 1 and None not in e.scores[:ran]
        ]
        if not means:
            return None
        return max(means) if self.mode == "max" else min(means)

    def verdict(self, index: int) -> str:
        """What entry `index` does next: `next` (run its next seed), `end` (a score that
        is not finite, no seed left, or its mean below the best fully raced config's) or
        `wait`: no config is fully raced yet and it trails the best on the same seeds, so
        it is judged again against the first full race (a leader's lucky first seed
        does not end it for good)."""
        entry = self.entries[index]
        if None in entry.scores or len(entry.scores) >= self.seeds:
            return END
        mean = mean_of(entry.finished())
        reference = self.reference(index)
        if reference is not None:
            return NEXT if _at_least(mean, reference, self.mode) else END
        leader = self.leader(index, len(entry.scores))
        return NEXT if leader is None or _at_least(mean, leader, self.mode) else WAIT

    def keeps_racing(self, index: int) -> bool:
        """Whether entry `index` runs its next seed now (`verdict`)."""
        return self.verdict(index) == NEXT

    def due(self) -> tuple[int | None, list[RaceEntry]]:
        """The entry whose next seed runs next, and the entries whose races end now.

        Of the entries still racing and not running, each is judged again as things are
        now (a config that kept up when its seed ended may trail a config raced since):
        those that trail a full race end, those that trail the leader before any full
        race wait; of the rest, the best mean runs next.

        Returns:
            (its index, or None where none is due; the entries that ended).
        """
        ended = []
        due = []
        for i, e in enumerate(self.entries):
            if e.ended or e.running:
                continue
            verdict = self.verdict(i)
            if verdict == NEXT:
                due.append(i)
            elif verdict == END:
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
        if entry.ended or self.verdict(index) != END:
            return None
        entry.ended = True
        return entry

    def entry_of(self, config: dict[str, Any]) -> int | None:
        """The entry that races `config` already (Optuna may draw a config twice from a
        space of choices), else None."""
        return next((i for i, e in enumerate(self.entries) if e.config == config), None)
