"""`scheduler: {type: hyperband}`: asynchronous Hyperband, ASHA's rungs over brackets
derived from the budget and the number of trials (tuner/spec/scheduler_defaults.yaml),
each trial dealt to its bracket in turn, the same on every run."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from ray.tune.schedulers import TrialScheduler

from tuner.cli._app import scheduler_line
from tuner.spec import (
    SpecError,
    bracket_shares,
    parse_spec,
    resolve_space,
    resolved_scheduler,
    scheduler_in_force,
    scheduler_metric,
)
from tuner.sweep._schedulers import HyperbandBrackets, build_scheduler, trial_count
from tuner.validation import validate_spec
from tuner.validation._limits import bracket_issues

STEPS = "num_env_steps_sampled_lifetime"
EVAL = "evaluation/env_runners/episode_return_mean"


class FakeTrial:
    """What a Tune scheduler reads of a trial: its id and tag (hashable, as Trial is)."""

    def __init__(self, trial_id: str, experiment_tag: str = "") -> None:
        self.trial_id, self.experiment_tag = trial_id, experiment_tag


def spec_of(trials: int, scheduler: dict, stop: dict | None = None):
    return parse_spec(
        {
            "name": "s",
            "algorithm": "PPO",
            "env": "CartPole-v1",
            "search": {"num_samples": trials},
            "scheduler": scheduler,
            "stop": stop or {"timesteps_total": 100_000},
        }
    )


def in_force(trials: int, scheduler: dict, stop: dict | None = None) -> dict:
    spec = spec_of(trials, scheduler, stop)
    return scheduler_in_force(spec, resolve_space(spec))


def test_bracket_shares_are_hyperbands_n_per_bracket():
    assert bracket_shares(1, 3) == [1.0]
    assert bracket_shares(2, 3) == pytest.approx([3 / 5, 2 / 5])
    assert bracket_shares(3, 3) == pytest.approx([9 / 17, 5 / 17, 3 / 17])


def test_sixteen_trials_get_two_brackets_one_judged_at_a_third_one_never():
    shown = in_force(16, {"type": "hyperband"})
    assert shown["time_attr"] == STEPS
    assert shown["brackets"] == [
        {"rungs": [33_334], "trials": 10},
        {"rungs": [100_000], "trials": 6},
    ]
    assert "brackets" in shown["derived"]


def test_the_brackets_follow_the_trials_as_asha_s_rungs_do():
    assert [b["trials"] for b in in_force(8, {"type": "hyperband"})["brackets"]] == [8]
    many = in_force(81, {"type": "hyperband"})["brackets"]
    assert [b["rungs"][0] for b in many] == [11_112, 33_336, 100_000]
    assert [b["trials"] for b in many] == [43, 24, 14]


def test_a_spec_s_own_brackets_are_kept_and_more_than_its_rungs_are_refused():
    own = in_force(16, {"type": "hyperband", "brackets": 1})
    assert own["brackets"] == [{"rungs": [33_334], "trials": 16}]
    assert "brackets" not in own["derived"]
    spec = spec_of(16, {"type": "hyperband", "brackets": 3})
    (issue,) = bracket_issues(spec, resolve_space(spec))
    assert issue.loc == "scheduler.brackets"
    assert issue.value == 3
    assert "spans 2 halving levels" in issue.msg
    with pytest.raises(SpecError) as err:  # the validation every surface runs
        validate_spec(spec, build_env=False)
    assert [i.loc for i in err.value.issues] == ["scheduler.brackets"]


def test_brackets_on_another_scheduler_is_an_error_naming_it():
    with pytest.raises(SpecError) as err:
        spec_of(16, {"type": "asha", "brackets": 2})
    assert "brackets (2) is a hyperband setting" in str(err.value)


def test_the_plan_line_shows_each_bracket_s_trials_and_rungs():
    line = scheduler_line(in_force(16, {"type": "hyperband"}))
    assert line.startswith(f"hyperband counting {STEPS}: grace_period 33,334")
    assert "; bracket 1: 10 trials, rungs at 33,334;" in line
    assert "; bracket 2: 6 trials, rungs at 100,000 (" in line


def _fed(scheduler: TrialScheduler, trials: int, reward_of) -> dict[str, str]:
    """Adds `trials` trials, then feeds each a result at the first rung (33,334 env
    steps) in turn; the decision Tune gets for each."""
    scheduler.set_search_properties("score", "max")
    added = [SimpleNamespace(trial_id=f"t{i}") for i in range(trials)]
    for trial in added:
        scheduler.on_trial_add(None, trial)
    return {
        t.trial_id: scheduler.on_trial_result(None, t, {STEPS: 40_000, "score": reward_of(i)})
        for i, t in enumerate(added)
    }


def test_the_last_bracket_lets_a_slow_starter_run_on_where_asha_stops_it():
    spec = spec_of(16, {"type": "hyperband"})
    resolved = resolved_scheduler(spec, resolve_space(spec))
    hyperband = build_scheduler(resolved, {})
    assert isinstance(hyperband, HyperbandBrackets)
    # each later trial worse than all before it: at the first rung ASHA stops it
    decisions = _fed(hyperband, 16, lambda i: -i)
    stopped = [t for t, d in decisions.items() if d == TrialScheduler.STOP]
    # bracket 2 (every second trial of the first four, then fewer) never judges at 33,334
    in_last = [t for t, i in hyperband.bracket_of.items() if i == 1]
    assert len(in_last) == 6
    assert not set(stopped) & set(in_last)
    assert stopped, decisions
    asha = build_scheduler(resolved_scheduler(spec_of(16, {"type": "asha"}), {}), {})
    asha_stopped = [t for t, d in _fed(asha, 16, lambda i: -i).items() if d == "STOP"]
    assert set(in_last) & set(asha_stopped)


def test_the_same_sweep_deals_the_same_trials_to_the_same_brackets():
    spec = spec_of(16, {"type": "hyperband"})
    dealt = []
    for _ in range(2):
        hyperband = build_scheduler(resolved_scheduler(spec, resolve_space(spec)), {})
        _fed(hyperband, 16, lambda i: i)
        dealt.append(dict(hyperband.bracket_of))
    assert dealt[0] == dealt[1]
    assert [dealt[0][f"t{i}"] for i in range(5)] == [0, 1, 0, 1, 0]


def test_a_retried_or_resumed_trial_keeps_its_bracket():
    spec = spec_of(16, {"type": "hyperband"})
    hyperband = build_scheduler(resolved_scheduler(spec, resolve_space(spec)), {})
    hyperband.set_search_properties("score", "max")
    trials = [SimpleNamespace(trial_id=f"t{i}", experiment_tag=f"{i + 1}_lr=0.1") for i in range(6)]
    for trial in trials:
        hyperband.on_trial_add(None, trial)
    first = dict(hyperband.bracket_of)
    assert [first[t.trial_id] for t in trials] == [0, 1, 0, 1, 0, 0]
    hyperband.on_trial_add(None, trials[1])  # Tune re-adds a trial it retries
    assert hyperband.bracket_of == first
    assert hyperband.counts == [4, 2]
    # a resume builds the scheduler anew and re-adds the trials, newest result first
    resumed = build_scheduler(resolved_scheduler(spec, resolve_space(spec)), {})
    resumed.set_search_properties("score", "max")
    for trial in reversed(trials):
        resumed.on_trial_add(None, trial)
    assert resumed.bracket_of == first


def test_the_trial_count_is_read_from_tunes_own_tags():
    # a grid or random search's BasicVariantGenerator counts from 0, an Optuna search's
    # SearchGenerator from 1 (the sweep tells the scheduler which: tuner/sweep/_tuner.py)
    from ray import tune
    from ray.tune.experiment import Experiment
    from ray.tune.search import BasicVariantGenerator
    from ray.tune.search.search_generator import SearchGenerator

    from tuner.sweep._searchers import TunerOptunaSearch

    def trainable(config):
        return None

    grid = Experiment("x", run=trainable, config={"a": tune.grid_search([1, 2, 3])})
    generator = BasicVariantGenerator()
    generator.add_configurations([grid])
    assert [trial_count(generator.next_trial()) for _ in range(3)] == [0, 1, 2]
    searcher = TunerOptunaSearch(space={"a": tune.choice([1, 2])}, metric="m", mode="max")
    optuna = SearchGenerator(searcher)
    optuna.add_configurations([Experiment("y", run=trainable, config={}, num_samples=3)])
    assert [trial_count(optuna.next_trial()) for _ in range(3)] == [1, 2, 3]
    assert trial_count(SimpleNamespace(experiment_tag="")) is None


def test_a_float_reduction_factor_builds_every_bracket_within_max_t():
    spec = spec_of(
        16,
        {"type": "hyperband", "grace_period": 1, "max_t": 100, "reduction_factor": 10**0.5},
        {"training_iteration": 100},
    )
    resolved = resolved_scheduler(spec, resolve_space(spec))
    assert resolved.brackets == 3
    assert max(resolved.bracket_graces()) <= 100
    assert len(build_scheduler(resolved, {}).brackets) == 3


def test_an_iteration_budget_gets_no_rung_a_step_short_of_it():
    # rounded down, 100 iterations made rungs at 33 and 99: a trial stopped at 99 never
    # ran its budget, so it had no final evaluation
    for kind in ("asha", "hyperband"):
        shown = in_force(16, {"type": kind}, {"training_iteration": 100})
        assert shown["rungs"] == [34], kind


def test_a_race_is_refused_with_hyperband():
    with pytest.raises(SpecError) as err:
        parse_spec(
            {
                "name": "s",
                "algorithm": "PPO",
                "env": "CartPole-v1",
                "search": {"method": "optuna", "num_samples": 16, "race": {"seeds": 2}},
                "scheduler": {"type": "hyperband"},
                "stop": {"timesteps_total": 100_000},
            }
        )
    assert "search.race: scheduler.type 'hyperband'" in str(err.value)


@pytest.mark.parametrize(
    ("metric", "evaluation", "judged"),
    [
        ("env_runners/episode_return_mean", {}, "env_runners/episode_return_mean"),
        (EVAL, {}, "env_runners/episode_return_mean"),
        (EVAL, {"interval": 2}, EVAL),
    ],
)
def test_a_scheduler_judges_what_every_iteration_reports(metric, evaluation, judged):
    spec = parse_spec(
        {
            "name": "s",
            "algorithm": "PPO",
            "env": "CartPole-v1",
            "search": {"num_samples": 16},
            "scheduler": {"type": "asha"},
            "stop": {"timesteps_total": 100_000},
            "metric": metric,
            "evaluation": evaluation,
        }
    )
    assert scheduler_metric(spec) == judged
    shown = scheduler_in_force(spec, resolve_space(spec))
    assert shown.get("judged_on", metric) == judged


@pytest.mark.parametrize("kind", ["asha", "hyperband", "median"])
def test_a_scheduler_told_the_evaluation_metric_judges_the_training_return(kind):
    # Tune hands a scheduler TuneConfig's metric; a final evaluation is in no result
    # before the budget, so a rung judging it would stop nothing
    spec = spec_of(16, {"type": kind})
    resolved = resolved_scheduler(spec, resolve_space(spec))
    scheduler = build_scheduler(resolved, {}, judged_on="env_runners/episode_return_mean")
    scheduler.set_search_properties(EVAL, "max")
    controller = SimpleNamespace(get_live_trials=list)  # no trial waits to run
    trials = [FakeTrial(f"t{i}", str(i + 1)) for i in range(16)]
    for trial in trials:
        scheduler.on_trial_add(controller, trial)
    stopped = set()
    for step in (20_000, 40_000, 60_000):
        for i, trial in enumerate(trials):
            if trial.trial_id in stopped:
                continue
            result = {STEPS: step, "env_runners/episode_return_mean": -i, "time_total_s": 1.0}
            result["training_iteration"] = step // 20_000
            if scheduler.on_trial_result(controller, trial, result) == TrialScheduler.STOP:
                stopped.add(trial.trial_id)
    assert stopped


def test_hand_set_values_make_a_last_bracket_that_never_judges_only_within_the_levels():
    # grace 1 to max_t 40 at 3: levels 1, 3, 9, 27 and 40; three brackets (the most)
    # judge first at 1, 3 and 9, so none runs every trial to max_t, as the plan shows
    spec = spec_of(16, {"type": "hyperband", "grace_period": 1, "max_t": 40}, {})
    resolved = resolved_scheduler(spec, resolve_space(spec))
    assert resolved.halving_levels() == 5
    assert [
        b["rungs"][0]
        for b in in_force(16, {"type": "hyperband", "grace_period": 1, "max_t": 40}, {})["brackets"]
    ] == [1, 3, 9]
    two = spec_of(16, {"type": "hyperband", "grace_period": 1, "max_t": 3}, {})
    assert resolved_scheduler(two, resolve_space(two)).halving_levels() == 2
