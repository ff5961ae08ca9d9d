"""The confirmation stage: the search's top-K configs re-run on S fresh seeds, ranked by
their mean score with a 95 % bootstrap CI and the IQM (Henderson et al. 2018; Agarwal
et al. 2021, "rliable"). A single-seed winner is often luck; this says how much."""

from __future__ import annotations

import json
import math
import random
from typing import Any

from tuner.mlflow_names import STAGE_CONFIRM, STAGE_SEARCH
from tuner.rllib import trial_seed
from tuner.spec import ExperimentSpec
from tuner.views import ConfirmedConfig, SweepSummary, TrialView

BOOTSTRAP_RESAMPLES = 10_000


def _key(values: dict[str, Any]) -> str:
    return json.dumps(values, sort_keys=True, default=str)


def pick_candidates(spec: ExperimentSpec, search: SweepSummary) -> list[TrialView]:
    """The top_k finished search trials by score, one per distinct config; with
    `objectives`, the Pareto front's members in its order (best first objective first)."""
    assert spec.confirm is not None
    done = [t for t in search.trials if t.stage == STAGE_SEARCH and t.score is not None]
    done.sort(key=lambda t: (t.score if spec.mode == "min" else -t.score, t.trial_id))
    if spec.objectives:
        by_id = {t.trial_id: t for t in done}
        done = [by_id[m.trial_id] for m in search.pareto if m.trial_id in by_id]
    out, seen = [], set()
    for trial in done:
        if _key(trial.config) not in seen:
            seen.add(_key(trial.config))
            out.append(trial)
        if len(out) == spec.confirm.top_k:
            break
    return out


def confirm_seeds(
    spec: ExperimentSpec, search_trials: int, used: set[int] | frozenset[int] = frozenset()
) -> list[int]:
    """S seeds after the search trials' (spec seed + trial index), skipping any seed a
    search trial ran with (`used`): disjoint from them, and the same for every config
    (their comparison is paired)."""
    assert spec.confirm is not None
    seeds: list[int] = []
    index = search_trials
    while len(seeds) < spec.confirm.seeds:
        seed = trial_seed(spec.seed, index)
        if seed not in used:
            seeds.append(seed)
        index += 1
    return seeds


def confirm_runs(candidates: list[TrialView], seeds: list[int]) -> list[dict[str, Any]]:
    """One run per (config, seed): {"of": search trial id, "values": ..., "seed": n}."""
    return [{"of": t.trial_id, "values": t.config, "seed": s} for t in candidates for s in seeds]


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


def confirmed_configs(
    spec: ExperimentSpec,
    candidates: list[TrialView],
    seeds: list[int],
    trials: list[TrialView],
    scores: dict[str, float | None],
) -> list[ConfirmedConfig]:
    """Each candidate's scores over its seeds (`scores`: confirmation trial id -> score),
    its statistics and median-score trial; best mean first."""
    by_run = {(_key(t.config), t.seed): t for t in trials if t.stage == STAGE_CONFIRM}
    out = []
    for cand in candidates:
        runs = [by_run.get((_key(cand.config), s)) for s in seeds]
        per_seed = [scores.get(t.trial_id) if t else None for t in runs]
        finite = [x for x in per_seed if x is not None and math.isfinite(x)]
        numbers = stats(finite, seed=spec.seed)
        median = median_trial(per_seed, runs, spec.mode)
        out.append(
            ConfirmedConfig(
                trial_id=cand.trial_id,
                config=cand.config,
                seeds=seeds,
                scores=per_seed,
                trials=[t.trial_id if t else "" for t in runs],
                median_trial_id=median.trial_id if median else None,
                checkpoint=median.checkpoint if median else None,
                **numbers,
            )
        )
    sign = 1 if spec.mode == "min" else -1
    out.sort(key=lambda c: (c.mean is None, sign * (c.mean or 0.0)))
    return out
