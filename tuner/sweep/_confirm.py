"""The confirmation stage: the search's top-K configs re-run on S fresh seeds, ranked by
their mean score with a 95 % bootstrap CI and the IQM (Henderson et al. 2018; Agarwal
et al. 2021, "rliable"). A single-seed winner is often luck; this says how much."""

from __future__ import annotations

import math
from typing import Any

from tuner.mlflow_names import STAGE_CONFIRM, STAGE_SEARCH
from tuner.results import search_rank
from tuner.rllib import trial_seed
from tuner.seed_stats import median_trial, race_groups, stats, values_key
from tuner.spec import ExperimentSpec
from tuner.views import ConfirmedConfig, SweepSummary, TrialView


def pick_candidates(spec: ExperimentSpec, search: SweepSummary) -> list[TrialView]:
    """The top_k finished search trials by score (a tie by `search_rank`), one per
    distinct config; with `objectives`, the Pareto front's members in its order (best
    first objective first); with search.race, the race's top_k configs (each its
    median-score seed's trial)."""
    assert spec.confirm is not None
    if spec.search.race is not None:  # each config by its mean over its seeds
        groups = race_groups(search.trials, spec.mode)
        ranked = [g.representative for g in groups if g.mean is not None]
        return ranked[: spec.confirm.top_k]
    done = [t for t in search.trials if t.stage == STAGE_SEARCH and t.score is not None]
    done.sort(key=lambda t: search_rank(t.score, t.train_score, t.seed, t.trial_id, spec.mode))
    if spec.objectives:
        by_id = {t.trial_id: t for t in done}
        done = [by_id[m.trial_id] for m in search.pareto if m.trial_id in by_id]
    out, seen = [], set()
    for trial in done:
        if values_key(trial.config) not in seen:
            seen.add(values_key(trial.config))
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


def confirmed_configs(
    spec: ExperimentSpec,
    candidates: list[TrialView],
    seeds: list[int],
    trials: list[TrialView],
    scores: dict[str, float | None],
) -> list[ConfirmedConfig]:
    """Each candidate's scores over its seeds (`scores`: confirmation trial id -> score),
    its statistics and median-score trial; best mean first."""
    by_run = {(values_key(t.config), t.seed): t for t in trials if t.stage == STAGE_CONFIRM}
    out = []
    for cand in candidates:
        runs = [by_run.get((values_key(cand.config), s)) for s in seeds]
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
