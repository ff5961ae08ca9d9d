"""Racing each config over seeds during the search (search.race): which config runs its
next seed, what Optuna is told, how the search ranks configs, and the spec's checks.

The searcher is the real one over a real Optuna study, driven as Tune drives it."""

from __future__ import annotations

import optuna
import pytest

from tests.unit.test_optuna_told import searcher_of
from tuner.mlflow_names import ITERATION_KEY, STEP_KEY
from tuner.rllib import INDEX_KEY, seed_of
from tuner.seed_stats import race_groups
from tuner.spec import SpecError, parse_spec
from tuner.sweep._confirm import pick_candidates
from tuner.sweep._race import Race, RaceEntry
from tuner.sweep._searchers import RacingOptunaSearch
from tuner.sweep._summary import race_best
from tuner.views import SweepSummary, TrialView

TRAIN = "env_runners/episode_return_mean"
EVAL = f"evaluation/{TRAIN}"
BUDGET = 4_000


def spec(race: dict | None = None, **extra):
    search = {"method": "optuna", "num_samples": 16, **extra.pop("search", {})}
    if race is not None:
        search["race"] = race
    body = {
        "name": "race",
        "algorithm": "PPO",
        "env": "CartPole-v1",
        "search": search,
        "stop": {"timesteps_total": BUDGET},
        "seed": 5,
        **extra,
    }
    return parse_spec(body)


def finish(searcher, trial_id: str, score: float | None) -> None:
    """The trial's end as Tune reports it: its final evaluation where it ran its budget.

    Tune hands every result to on_trial_result but the one it stops the trial on (its
    budget's, or a scheduler's stop), which goes to on_trial_complete only."""
    searcher.on_trial_result(trial_id, {TRAIN: 1.0, ITERATION_KEY: 3, STEP_KEY: BUDGET - 1000})
    last = {TRAIN: 1.0, ITERATION_KEY: 4, STEP_KEY: BUDGET}
    if score is None:  # stopped early: no final evaluation
        last[STEP_KEY] = 1000
    else:
        last[EVAL] = score
    searcher.on_trial_complete(trial_id, last)


def values(config: dict) -> dict:
    return {k: v for k, v in config.items() if k != INDEX_KEY}


def test_a_lucky_seed_meets_its_other_seeds_and_optuna_is_told_the_mean():
    searcher = searcher_of(spec({"seeds": 2}))
    assert isinstance(searcher, RacingOptunaSearch)
    a0 = searcher.suggest("a0")
    assert a0[INDEX_KEY] == 0
    finish(searcher, "a0", 500.0)  # a lucky first seed
    a1 = searcher.suggest("a1")  # its second seed runs before any new config
    assert values(a1) == values(a0)
    assert a1[INDEX_KEY] == 1
    finish(searcher, "a1", 100.0)
    b0 = searcher.suggest("b0")
    assert values(b0) != values(a0)
    assert b0[INDEX_KEY] == 0
    finish(searcher, "b0", 350.0)  # above a's mean (300): b races on
    b1 = searcher.suggest("b1")
    assert values(b1) == values(b0)
    assert b1[INDEX_KEY] == 1
    finish(searcher, "b1", 330.0)
    c0 = searcher.suggest("c0")
    finish(searcher, "c0", 200.0)  # below the best full mean (340): c stops
    d0 = searcher.suggest("d0")
    assert values(d0) not in (values(a0), values(b0), values(c0))
    assert d0[INDEX_KEY] == 0
    # Optuna knows each config by its first seed's trial: told its mean once raced
    study = searcher._ot_study.trials
    assert [(t.state, t.value) for t in study[:3]] == [
        (optuna.trial.TrialState.COMPLETE, 300.0),
        (optuna.trial.TrialState.COMPLETE, 340.0),
        (optuna.trial.TrialState.COMPLETE, 200.0),
    ]
    assert study[3].state == optuna.trial.TrialState.RUNNING
    # a config's seed index is its trial's seed: spec seed + index, the same for all
    assert seed_of(b0, "b0", 5) == seed_of(a0, "a0", 5) == 5
    assert seed_of(b1, "b1", 5) == seed_of(a1, "a1", 5) == 6


def test_a_seed_stopped_early_ends_its_configs_race_as_pruned():
    searcher = searcher_of(spec({"seeds": 3}, scheduler={"type": "asha"}))
    searcher.suggest("a0")
    finish(searcher, "a0", 400.0)
    searcher.suggest("a1")
    finish(searcher, "a1", None)  # ASHA stopped its second seed
    fresh = searcher.suggest("b0")
    assert fresh[INDEX_KEY] == 0  # a's race is over
    assert searcher._ot_study.trials[0].state == optuna.trial.TrialState.PRUNED


def test_due_configs_run_best_mean_first_and_the_reference_is_a_full_race():
    race = Race(seeds=2, mode="max")
    race.entries = [
        RaceEntry({"lr": 1}, "a", [300.0, 280.0], running=False, ended=True),
        RaceEntry({"lr": 2}, "b", [310.0], running=False),
        RaceEntry({"lr": 3}, "c", [350.0], running=False),
        RaceEntry({"lr": 4}, "d", [290.0], running=True),
    ]
    assert race.reference(skip=1) == 290.0
    assert race.keeps_racing(1)
    assert race.keeps_racing(2)
    assert race.due() == (2, [])  # c's mean is the higher
    race.trials["d0"] = (3, 0)
    ended = race.finish("d0", 280.0)  # below 290
    assert ended is race.entries[3]
    assert ended.ended
    # mode min: lower is better
    low = Race(seeds=2, mode="min", entries=[RaceEntry({}, "a", [1.0, 3.0], False, True)])
    low.entries.append(RaceEntry({}, "b", [1.5], running=False))
    assert low.keeps_racing(1)  # 1.5 <= a's mean 2.0
    low.entries[1].scores = [2.5]
    assert not low.keeps_racing(1)
    low.entries[1].scores = [1.0, 1.5]
    assert not low.keeps_racing(1)  # every seed run


def test_before_any_race_is_full_a_config_trailing_the_leader_waits_for_the_first_full_race():
    """No config has run all three seeds yet: a config whose first seed scored -500 does
    not run two more while another config's first seed scored -112 (it did, before); it
    waits, and is judged against the first full race once there is one (the leader's
    lucky first seed does not end it for good)."""
    race = Race(seeds=3, mode="max")
    race.entries = [
        RaceEntry({"lr": 1}, "a", [-112.0, -89.0], running=True),
        RaceEntry({"lr": 2}, "b", [-500.0], running=False),
        RaceEntry({"lr": 3}, "c", [-100.0], running=False),
    ]
    assert race.leader(skip=1, ran=1) == -100.0  # the best first seed of a and c
    assert race.verdict(1) == "wait"
    assert race.verdict(2) == "next"  # -100 is at least a's -112
    assert race.leader(skip=0, ran=2) is None  # no other config ran two seeds
    assert race.verdict(0) == "next"
    race.entries.append(RaceEntry({"lr": 4}, "d", [], running=True))
    race.trials["d0"] = (3, 0)
    assert race.finish("d0", -120.0) is None  # below the leader: d waits, not told yet
    assert race.due() == (2, [])  # c runs its second seed; b and d wait
    race.start("c1", 2)
    assert not race.entries[3].ended
    race.trials["a2"] = (0, 2)
    race.entries[0].running = True
    race.finish("a2", -400.0)  # a fully raced: mean -200.3
    due, ended = race.due()
    assert ended == [race.entries[1]]  # -500 trails the full race: ends
    assert due == 3  # d's -120 keeps up with it: runs its second seed
    assert race.leader(skip=1, ran=0) is None


def view(tid: str, lr: float, seed: int, score: float | None) -> TrialView:
    return TrialView(
        trial_id=tid,
        status="TERMINATED",
        config={"lr": lr},
        seed=seed,
        score=score,
        train_score=score,
        checkpoint=f"/ckpt/{tid}",
    )


def test_the_search_ranks_configs_by_mean_over_the_most_seeds():
    s = spec({"seeds": 3}, confirm={"top_k": 2, "seeds": 3})
    trials = [
        view("a0", 0.1, 5, 500.0),  # the single best trial: a lucky seed
        view("a1", 0.1, 6, 120.0),
        view("a2", 0.1, 7, 100.0),
        view("b0", 0.2, 5, 450.0),
        view("b1", 0.2, 6, 430.0),
        view("b2", 0.2, 7, 470.0),
        view("c0", 0.3, 5, 490.0),  # one seed only: not above the fully raced
        view("d0", 0.4, 5, 480.0),
        view("d1", 0.4, 6, None),  # stopped early: below every whole race
    ]
    groups = race_groups(trials, s.mode)
    assert [g.representative.trial_id for g in groups] == ["b0", "a1", "c0", "d0"]
    assert groups[0].mean == pytest.approx(450.0)
    best = race_best(s, trials, {t.trial_id: {} for t in trials}, EVAL)
    assert best is not None
    assert best.config == {"lr": 0.2}
    assert best.metric_value == pytest.approx(450.0)  # the mean, not a single seed
    assert best.trial_id == best.checkpoint_trial_id == "b0"  # the median seed's
    assert best.checkpoint == "/ckpt/b0"
    assert best.seed == 5
    assert best.race.seeds == [5, 6, 7]
    assert best.race.scores == [450.0, 430.0, 470.0]
    assert best.race.trials == ["b0", "b1", "b2"]
    assert best.scope == "final-evaluation"  # the scores are final evaluations
    # the confirmation re-runs the race's top configs, not the lucky seed's
    summary = SweepSummary(name="race", status="SUCCEEDED", metric=TRAIN, mode="max")
    summary.trials = trials
    assert [t.trial_id for t in pick_candidates(s, summary)] == ["b0", "a1"]


@pytest.mark.parametrize("mode", ["max", "min"])
def test_configs_tied_on_their_mean_go_to_the_better_training_mean(mode):
    """CartPole's saturated 500: two configs raced over the same seeds, both at a mean of
    500; the one whose exploring policy also trained better ranks first, whatever its
    values' key."""
    sign = 1 if mode == "max" else -1
    trials = []
    for tid, lr, seed, train in (
        ("a0", 0.1, 5, 480.0),
        ("a1", 0.1, 6, 490.0),
        ("b0", 0.2, 5, 500.0),
        ("b1", 0.2, 6, 495.0),
    ):
        trial = view(tid, lr, seed, sign * 500.0)
        trials.append(trial.model_copy(update={"train_score": sign * train}))
    groups = race_groups(trials, mode)
    assert [g.representative.config["lr"] for g in groups] == [0.2, 0.1]


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        ({"search": {"method": "grid", "space": {"lr": {"grid": [0.1]}}}}, "race"),
        ({"search": {"num_samples": 2}}, "num_samples >= 3"),
        ({"scheduler": {"type": "pbt"}, "search": {"method": "random"}}, "pbt"),
        (
            {
                "objectives": [
                    {"metric": TRAIN, "mode": "max"},
                    {"metric": "time_total_s", "mode": "min"},
                ]
            },
            "objectives",
        ),
    ],
)
def test_a_race_the_search_cannot_run_is_refused_naming_the_field(extra, needle):
    with pytest.raises(SpecError) as err:
        spec({"seeds": 3}, **extra)
    assert needle in str(err.value)
    assert "race" in str(err.value)


def test_a_raced_random_search_draws_through_optunas_random_sampler():
    searcher = searcher_of(spec({"seeds": 2}, search={"method": "random"}))
    assert isinstance(searcher, RacingOptunaSearch)
    assert isinstance(searcher._sampler, optuna.samplers.RandomSampler)
    assert spec(None, search={"method": "random"}).search.race is None


def test_a_config_due_before_the_reference_rose_is_judged_again_when_its_seed_is_due():
    """Three configs end their first seed before any is fully raced: b (10) first, due;
    a (100), due; c (5) trails the leader and waits. a's mean is the best: it runs its
    second seed first; once it is raced to 100, b and c trail the full race and end."""
    searcher = searcher_of(spec({"seeds": 2}))
    firsts = {}
    for tid in ("a0", "b0", "c0"):
        firsts[tid] = values(searcher.suggest(tid))  # three at once
    for tid, score in (("b0", 10.0), ("a0", 100.0), ("c0", 5.0)):
        finish(searcher, tid, score)
    assert not searcher.tuner_race.entries[2].ended  # c: below a's 100, waiting
    a1 = searcher.suggest("a1")
    assert values(a1) == firsts["a0"]
    assert a1[INDEX_KEY] == 1
    finish(searcher, "a1", 100.0)
    d0 = searcher.suggest("d0")  # b and c trail 100: their races end, a new config runs
    assert d0[INDEX_KEY] == 0
    assert values(d0) not in firsts.values()
    told = [(t.state, t.value) for t in searcher._ot_study.trials[:3]]
    assert told == [
        (optuna.trial.TrialState.COMPLETE, 100.0),
        (optuna.trial.TrialState.COMPLETE, 10.0),
        (optuna.trial.TrialState.COMPLETE, 5.0),
    ]


def test_without_a_final_evaluation_a_seed_is_scored_over_its_curve_as_the_summary_scores_it():
    """Ranked by the metric under scope (last-5-avg), not its last value: the seed's
    score is the mean of its last five iterations' returns."""
    s = spec({"seeds": 2}, stop={"training_iteration": 6}, evaluation={"at_end": False})
    searcher = searcher_of(s)
    searcher.suggest("a0")
    returns = [10.0, 20.0, 30.0, 40.0, 50.0, 500.0]
    for i, value in enumerate(returns, start=1):
        searcher.on_trial_result("a0", {TRAIN: value, ITERATION_KEY: i, STEP_KEY: i * 100})
    searcher.on_trial_complete("a0", {TRAIN: 500.0, ITERATION_KEY: 6, STEP_KEY: 600})
    assert searcher.tuner_race.entries[0].scores == [pytest.approx(sum(returns[1:]) / 5)]


def test_a_seed_that_ends_again_replaces_its_score_and_optuna_is_told_once():
    searcher = searcher_of(spec({"seeds": 2}))
    searcher.suggest("a0")
    finish(searcher, "a0", 100.0)
    searcher.suggest("a1")
    searcher.on_trial_complete("a1", None, error=True)  # failed: the race ends, pruned
    searcher.on_trial_complete("a1", None, error=True)  # an errored trial resumed, again
    assert searcher.tuner_race.entries[0].scores == [100.0, None]
    assert [t.state for t in searcher._ot_study.trials] == [optuna.trial.TrialState.FAIL]


def test_a_config_optuna_draws_again_is_not_a_second_race_of_it():
    """A space of choices only: Optuna's random start draws a config again. It is told
    what that config scored so far and draws another; once every config is drawn and
    raced, the search is finished."""
    s = spec(
        {"seeds": 2},
        search={"space": {"gamma": {"choice": [0.9, 0.99]}}, "num_samples": 8},
    )
    searcher = searcher_of(s)
    seen = []
    for i in range(4):
        out = searcher.suggest(f"t{i}")
        assert isinstance(out, dict)
        seen.append((values(out)["gamma"], out[INDEX_KEY]))
        finish(searcher, f"t{i}", 100.0)
    assert sorted(seen) == [(0.9, 0), (0.9, 1), (0.99, 0), (0.99, 1)]
    assert searcher.suggest("t4") == "FINISHED"
    assert len(searcher.tuner_race.entries) == 2


def test_a_function_trainables_seed_is_its_searchers_index(monkeypatch):
    from types import SimpleNamespace

    from ray import tune

    from tuner.rllib._custom import _seeded

    context = SimpleNamespace(get_trial_id=lambda: "a1b2c3d4")  # a searcher's random id
    monkeypatch.setattr(tune, "get_context", lambda: context)
    assert _seeded({"seed": 5, INDEX_KEY: 1, "lr": 0.1}) == {"seed": 6, "lr": 0.1}


def test_a_warm_start_from_a_raced_sweep_takes_each_config_once_with_its_mean():
    """The earlier sweep's answer ranks configs by their seeds' mean: a warm start reuses
    that ranking (each config run first once, Optuna told the mean), not one lucky seed."""
    from tests.stored import earlier_sweep
    from tuner.spec import resolve_space
    from tuner.tracking import warm_start

    lr = {"space": {"lr": {"uniform": [0.05, 0.5]}}}
    earlier_spec = spec({"seeds": 2}, search=lr)
    trials = [
        view("a0", 0.1, 5, 500.0),  # a lucky seed
        view("a1", 0.1, 6, 100.0),
        view("b0", 0.2, 5, 450.0),
        view("b1", 0.2, 6, 430.0),
    ]
    earlier = earlier_sweep("raced", earlier_spec, trials)
    warm = spec(search={**lr, "warm_start": {"from": "raced", "top_k": 2}})
    space = resolve_space(warm)
    out = warm_start(warm, space, earlier)
    assert out.first == [{"lr": 0.2}, {"lr": 0.1}]
    assert out.known == [({"lr": 0.2}, 440.0), ({"lr": 0.1}, 300.0)]
    unraced = earlier.model_copy(update={"spec": spec(search=lr)})
    assert warm_start(warm, space, unraced).known[0] == ({"lr": 0.1}, 500.0)


def test_a_seeds_final_evaluation_reaches_the_race_from_the_result_tune_stops_it_on():
    """Tune hands the result at the budget (the one with the final evaluation) to
    on_trial_complete only: the seed is scored by it, and the first config, with nothing
    to trail, runs its second seed."""
    searcher = searcher_of(spec({"seeds": 2}))
    searcher.suggest("a0")
    for i in (1, 2, 3):  # the iterations before the budget: training returns only
        searcher.on_trial_result("a0", {TRAIN: 10.0 * i, ITERATION_KEY: i, STEP_KEY: i * 1000})
    searcher.on_trial_complete("a0", {TRAIN: 40.0, EVAL: 321.0, ITERATION_KEY: 4, STEP_KEY: BUDGET})
    assert searcher.tuner_race.entries[0].scores == [321.0]
    assert searcher.suggest("a1")[INDEX_KEY] == 1
