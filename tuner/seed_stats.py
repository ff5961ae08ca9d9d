"""Statistics over seeds, plain functions over trial views: a config's scores as mean,
CI and IQM (`stats`), the median-score trial whose checkpoint stands for a config, and a
raced search's configs ranked by their mean over the seeds they ran (`race_groups`,
search.race). Every layer ranks seeds so: the sweep's summary and confirmation, and the
store's live best."""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass
from typing import Any

from tuner.mlflow_names import STAGE_SEARCH
from tuner.views import ConfirmedConfig, TrialView

BOOTSTRAP_RESAMPLES = 10_000


def stats(scores: list[float], seed: int = 0) -> dict[str, Any]:
    """Mean, sample std, 95 % percentile-bootstrap CI of the mean, and IQM of scores.

    Args:
        scores: The scores (one per seed).
        seed: The bootstrap's seed.

    Returns:
        {"mean", "std", "ci95", "iqm"}; each None for no score.
    """
    n = len(scores)
    if n == 0:
        return {"mean": None, "std": None, "ci95": None, "iqm": None}
    mean = sum(scores) / n
    std = math.sqrt(sum((x - mean) ** 2 for x in scores) / (n - 1)) if n > 1 else 0.0
    rng = random.Random(seed)
    means = sorted(sum(rng.choices(scores, k=n)) / n for _ in range(BOOTSTRAP_RESAMPLES))
    ci95 = [means[int(0.025 * BOOTSTRAP_RESAMPLES)], means[int(0.975 * BOOTSTRAP_RESAMPLES) - 1]]
    return {"mean": mean, "std": std, "ci95": ci95, "iqm": iqm(scores)}


def iqm(scores: list[float]) -> float:
    """Interquartile mean: the mean of the middle 50 % (rliable's 25 % trimmed mean,
    with the boundary scores weighted by the fraction inside)."""
    xs, n = sorted(scores), len(scores)
    lo, hi = 0.25 * n, 0.75 * n
    total = weight = 0.0
    for i, x in enumerate(xs):
        inside = max(0.0, min(i + 1, hi) - max(i, lo))
        total += inside * x
        weight += inside
    return total / weight


def median_trial(
    scores: list[float | None], trials: list[TrialView | None], mode: str
) -> TrialView | None:
    """The trial with the median score (failed and non-finite scores left out); of an
    even number, the worse of the two middle ones (the lower for `mode: max`), so the
    model registered from it never flatters the config. Ties keep the seeds' order."""
    ranked = sorted(
        (
            (x, t)
            for x, t in zip(scores, trials, strict=True)
            if t is not None and x is not None and math.isfinite(x)
        ),
        key=lambda p: p[0] if mode == "max" else -p[0],  # worst first
    )
    return ranked[(len(ranked) - 1) // 2][1] if ranked else None


@dataclass
class RaceGroup:
    """A config's trials in the search (its seeds), as ranked."""

    key: str
    trials: list[TrialView]
    scores: list[float | None]
    mean: float | None
    representative: TrialView


def values_key(values: dict[str, Any]) -> str:
    """A config's sampled values as one comparable key (the same config, the same key).

    Args:
        values: The sampled values.

    Returns:
        The key.
    """
    return json.dumps(values, sort_keys=True, default=str)


def _mean(scores: list[float]) -> float:
    return sum(scores) / len(scores)


def race_groups(trials: list[TrialView], mode: str) -> list[RaceGroup]:
    """The search's configs, each with its trials in seed order, best first: by the
    seeds it ran without a stop or failure (more first), then by its mean score (module
    docstring), a tie by its seeds' mean training score (as `results.search_rank` breaks
    a trial's), then by its values. Its representative is its median-score trial (of an
    even number, the worse of the two middle ones), whose checkpoint and seed stand for
    the config.

    Args:
        trials: The sweep's trials (the search's are ranked).
        mode: max or min.

    Returns:
        The groups, best first; configs without a finite score last.
    """
    by_key: dict[str, list[TrialView]] = {}
    for t in trials:
        if t.stage == STAGE_SEARCH:
            by_key.setdefault(values_key(t.config), []).append(t)
    groups = []
    for key, members in by_key.items():
        members.sort(key=lambda t: (t.seed is None, t.seed or 0, t.trial_id))
        scores = [t.score for t in members]
        finite = [s for s in scores if s is not None and math.isfinite(s)]
        median = median_trial(scores, list(members), mode)
        groups.append(
            RaceGroup(
                key=key,
                trials=members,
                scores=scores,
                mean=_mean(finite) if finite else None,
                representative=median or members[0],
            )
        )
    sign = -1 if mode == "max" else 1

    def rank(g: RaceGroup) -> tuple[bool, bool, int, float, bool, float, str]:
        whole = len([s for s in g.scores if s is not None]) == len(g.scores)
        trains = [t.train_score for t in g.trials]
        trained = [x for x in trains if x is not None and math.isfinite(x)]
        train = sign * _mean(trained) if trained else 0.0
        return (
            g.mean is None,
            not whole,
            -len(g.scores),
            sign * (g.mean or 0.0),
            not trained,
            train,
            g.key,
        )

    groups.sort(key=rank)
    return groups


def race_record(group: RaceGroup, seed: int) -> ConfirmedConfig:
    """A raced config's seeds in the search as the answer's `race`: their scores, mean,
    CI and IQM, its median-score trial and checkpoint.

    Args:
        group: The config's group (race_groups).
        seed: The bootstrap's seed (the spec's).

    Returns:
        The record.
    """
    rep = group.representative
    return ConfirmedConfig(
        trial_id=rep.trial_id,
        config=rep.config,
        seeds=[t.seed if t.seed is not None else -1 for t in group.trials],
        scores=group.scores,
        trials=[t.trial_id for t in group.trials],
        median_trial_id=rep.trial_id,
        checkpoint=rep.checkpoint,
        **stats([x for x in group.scores if x is not None], seed=seed),
    )
