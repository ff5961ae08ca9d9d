"""How trials are ranked (scope) and how confirmed configs are summarised."""

from __future__ import annotations

import math
import statistics

import pytest

from tuner.results import scope_value, search_rank
from tuner.seed_stats import iqm
from tuner.spec import SpecError, parse_spec
from tuner.sweep import stats
from tuner.sweep._confirm import confirm_seeds, pick_candidates
from tuner.views import SweepSummary, TrialView

HISTORY = [1.0, 9.0, 2.0, 3.0, 4.0, 5.0, 6.0]


@pytest.mark.parametrize(
    ("scope", "mode", "expected"),
    [
        ("last", "max", 6.0),
        ("last-5-avg", "max", 4.0),
        ("last-10-avg", "max", 30 / 7),
        ("avg", "max", 30 / 7),
        ("all", "max", 9.0),
        ("all", "min", 1.0),
    ],
)
def test_scope_values(scope, mode, expected):
    assert scope_value(HISTORY, scope, mode) == pytest.approx(expected)


def test_scope_ignores_missing_values_and_empty_histories():
    assert scope_value([float("nan"), 2.0, None], "last", "max") == 2.0
    assert scope_value([], "last-5-avg", "max") is None


def test_a_lucky_peak_does_not_win_under_the_default_scope():
    lucky, steady = [0.0, 500.0, 100.0, 90.0, 80.0], [300.0, 310.0, 320.0, 330.0, 340.0]
    assert scope_value(lucky, "all", "max") > scope_value(steady, "all", "max")
    assert scope_value(steady, "last-5-avg", "max") > scope_value(lucky, "last-5-avg", "max")


def test_stats_mean_std_ci_and_iqm():
    scores = [446.9, 500.0, 480.0, 471.0, 492.0]
    out = stats(scores, seed=3)
    assert out["mean"] == pytest.approx(statistics.mean(scores))
    assert out["std"] == pytest.approx(statistics.stdev(scores))
    lo, hi = out["ci95"]
    assert min(scores) <= lo < out["mean"] < hi <= max(scores)
    assert stats(scores, seed=3) == out  # seeded: the same CI every time
    assert out["iqm"] == pytest.approx(iqm(scores))


def test_iqm_is_the_mean_of_the_middle_half():
    assert iqm([1, 2, 3, 4]) == pytest.approx(2.5)
    assert iqm([0, 10, 10, 10, 10, 10, 10, 1000]) == pytest.approx(10)
    five = [1.0, 2.0, 3.0, 4.0, 100.0]  # rliable: boundary scores count in part
    assert iqm(five) == pytest.approx((0.75 * 2 + 3 + 0.75 * 4) / 2.5)
    assert not math.isnan(iqm([5.0]))


def spec(**patch):
    data = {"name": "c", "algorithm": "PPO", "env": "CartPole-v1", "seed": 10}
    data.update(patch)
    return parse_spec(data)


def test_candidates_are_the_top_k_distinct_finished_configs():
    trials = [
        TrialView(trial_id="t_00000", status="TERMINATED", config={"lr": 1}, score=5.0),
        TrialView(trial_id="t_00001", status="TERMINATED", config={"lr": 2}, score=9.0),
        TrialView(trial_id="t_00002", status="TERMINATED", config={"lr": 2}, score=8.0),
        TrialView(trial_id="t_00003", status="ERROR", config={"lr": 3}, score=None),
        TrialView(trial_id="t_00004", status="TERMINATED", config={"lr": 4}, score=7.0),
    ]
    summary = SweepSummary(name="c", status="SUCCEEDED", metric="m", mode="max", trials=trials)
    picked = pick_candidates(spec(confirm={"top_k": 2, "seeds": 3}), summary)
    assert [t.trial_id for t in picked] == ["t_00001", "t_00004"]
    low = pick_candidates(spec(mode="min", confirm={"top_k": 1, "seeds": 3}), summary)
    assert [t.trial_id for t in low] == ["t_00000"]


# CartPole's saturated scores (2026-12-02): tied at 500, trial ids random hex (a searcher's)
TIED = [
    ("f1c0ffee", 500.0, 491.1, 11),
    ("0badcafe", 500.0, 500.0, 16),  # the least id: what the ids alone used to pick
    ("9dead000", 500.0, 500.0, 13),  # as good a training return, suggested earlier
    ("00000001", 497.0, 500.0, 10),
    ("77777777", None, 480.0, 12),  # stopped before its budget: no score
]


def tied(mode: str = "max") -> list[TrialView]:
    sign = 1 if mode == "max" else -1
    return [
        TrialView(
            trial_id=tid,
            status="TERMINATED",
            config={"lr": i},
            score=None if score is None else sign * score,
            train_score=sign * train,
            seed=seed,
        )
        for i, (tid, score, train, seed) in enumerate(TIED)
    ]


@pytest.mark.parametrize("mode", ["max", "min"])
def test_a_tie_on_score_goes_to_the_training_score_then_to_the_searchers_order(mode):
    summary = SweepSummary(name="c", status="SUCCEEDED", metric="m", mode=mode, trials=tied(mode))
    picked = pick_candidates(spec(mode=mode, confirm={"top_k": 4, "seeds": 3}), summary)
    assert [t.trial_id for t in picked] == ["9dead000", "0badcafe", "f1c0ffee", "00000001"]


def test_the_rank_puts_missing_and_non_finite_values_after_every_number():
    ranked = sorted(
        [
            search_rank(None, 500.0, 1, "a", "max"),
            search_rank(float("nan"), 500.0, 2, "b", "max"),
            search_rank(-1e9, None, 3, "c", "max"),
            search_rank(-1e9, 5.0, None, "d", "max"),
            search_rank(-1e9, 5.0, 4, "e", "max"),
        ]
    )
    assert [key[-1] for key in ranked] == ["e", "d", "c", "a", "b"]


def test_confirmation_seeds_follow_every_search_seed():
    seeds = confirm_seeds(spec(confirm={"top_k": 2, "seeds": 3}), search_trials=8)
    assert seeds == [18, 19, 20]
    assert set(seeds).isdisjoint(range(10, 18))
    # seeds a searcher's trials ran with are skipped
    assert confirm_seeds(spec(confirm={"top_k": 1, "seeds": 2}), 2, {12, 13}) == [14, 15]


def test_searcher_trial_ids_without_an_index_still_get_distinct_seeds():
    from tuner.rllib import trial_index, trial_seed

    assert trial_index("a1b2c_00003") == 3
    ids = ["0e69f590", "2a9d0b55", "64708754", "b1e3626d"]  # optuna's trial ids
    seeds = {trial_seed(0, trial_index(i)) for i in ids}
    assert len(seeds) == len(ids)
    assert all(s >= 1_000_000 for s in seeds)
    assert trial_index("64708754") == trial_index("64708754")  # stable


@pytest.mark.parametrize(
    ("field", "value"),
    [("scope", "best"), ("confirm", {"top_k": 0, "seeds": 3}), ("confirm", {"seeds": 1})],
)
def test_bad_scope_and_confirm_are_named(field, value):
    with pytest.raises(SpecError) as err:
        spec(**{field: value})
    assert err.value.issues[0].loc.startswith(field)


def confirm_stage(scores_by_seed: dict[int, float | None], mode: str = "max"):
    """One candidate confirmed on the given seeds: its confirmed config."""
    from tuner.sweep._confirm import confirmed_configs

    cand = TrialView(trial_id="s_00000", status="TERMINATED", config={"lr": 1}, score=1.0)
    seeds = list(scores_by_seed)
    trials = [
        TrialView(
            trial_id=f"c_{i:05d}",
            status="TERMINATED",
            config={"lr": 1},
            seed=s,
            stage="confirm",
            checkpoint=f"/ckpt/{s}",
        )
        for i, s in enumerate(seeds)
    ]
    scores = {t.trial_id: scores_by_seed[t.seed] for t in trials}
    (confirmed,) = confirmed_configs(
        spec(mode=mode, confirm={"top_k": 1, "seeds": len(seeds)}), [cand], seeds, trials, scores
    )
    return confirmed, {t.trial_id: t.seed for t in trials}


@pytest.mark.parametrize(
    ("scores", "mode", "median_seed"),
    [
        ({20: 300.0, 21: 100.0, 22: 500.0}, "max", 20),  # odd: the median itself
        ({20: 300.0, 21: 100.0, 22: 500.0}, "min", 20),
        ({20: 400.0, 21: 100.0, 22: 500.0, 23: 200.0}, "max", 23),  # even: the lower middle
        ({20: 400.0, 21: 100.0, 22: 500.0, 23: 200.0}, "min", 20),  # ... the higher (worse)
        ({20: 9.0, 21: None, 22: 1.0, 23: 5.0}, "max", 23),  # a failed seed is left out
        ({20: 9.0, 21: float("nan"), 22: 1.0}, "max", 22),  # so is a non-finite score
    ],
)
def test_the_median_trial_is_the_seed_with_the_median_score(scores, mode, median_seed):
    confirmed, seed_of = confirm_stage(scores, mode)
    assert seed_of[confirmed.median_trial_id] == median_seed
    assert confirmed.checkpoint == f"/ckpt/{median_seed}"  # the one registered in MLflow
    assert len(confirmed.scores) == len(scores)  # every seed keeps its place


def test_an_own_loops_confirmation_trials_carry_their_confirmation_seeds():
    """A training loop of your own reports no seed (RLlib trials report `tuner/seed`):
    a confirmation trial's is the one its config re-runs with, not its index's."""
    from types import SimpleNamespace

    import pandas as pd

    from tuner.rllib import CONFIRM_KEY
    from tuner.sweep import summarise

    own = spec(
        algorithm="tuner_examples.trainables:reinforce",
        env=None,
        model={},
        metric="episode_return_mean",
        search={"method": "grid", "space": {"lr": {"grid": [0.1, 0.2]}}},
        confirm={"top_k": 1, "seeds": 2},
    )

    class Grid(list):
        experiment_path = "/tmp/own-confirm"

    runs = [{"of": "s_00001", "values": {"lr": 0.2}, "seed": s} for s in (12, 13)]
    grid = Grid(
        SimpleNamespace(
            metrics={"training_iteration": 2, "done": True, "trial_id": f"c_{i:05d}"},
            path=f"/tmp/own-confirm/c_{i:05d}",
            metrics_dataframe=pd.DataFrame({"episode_return_mean": [20.0, 30.0 + i]}),
            error=None,
            config={"seed": 10, CONFIRM_KEY: run},
            checkpoint=None,
            filesystem=None,
        )
        for i, run in enumerate(runs)
    )
    stage = summarise(own, grid, space={"lr": None}, confirming=True)
    assert [(t.seed, t.config, t.stage) for t in stage.trials] == [
        (12, {"lr": 0.2}, "confirm"),
        (13, {"lr": 0.2}, "confirm"),
    ]
