"""Scheduler settings a spec leaves out follow its budget and its number of trials
(tuner/spec/scheduler_defaults.yaml): slow starters are not judged on luck."""

from __future__ import annotations

from typing import Any

import pytest
from ray.tune.schedulers import MedianStoppingRule

from tuner.spec import parse_spec, resolve_space, resolved_scheduler
from tuner.sweep._schedulers import build_scheduler


def resolved(trials: int, scheduler: dict, stop: dict):
    spec = parse_spec(
        {
            "name": "s",
            "algorithm": "PPO",
            "env": "CartPole-v1",
            "search": {"num_samples": trials},
            "scheduler": scheduler,
            "stop": stop,
        }
    )
    return resolved_scheduler(spec, resolve_space(spec))


STEPS = {"type": "asha", "time_attr": "num_env_steps_sampled_lifetime"}


@pytest.mark.parametrize(
    ("trials", "rungs", "grace"),
    [(8, 1, 30_000), (16, 2, 10_000), (26, 2, 10_000), (27, 3, 3_334), (100, 3, 3_334)],
)
def test_asha_makes_as_many_rungs_as_its_trials_fill(trials, rungs, grace):
    # rungs counted with the budget's own level (a grace rounded up lands the top one a
    # few steps past the budget: Tune drops it, and the budget ends the trial there)
    asha = resolved(trials, STEPS, {"timesteps_total": 30_000})
    assert asha.max_t == 30_000
    assert asha.reduction_factor == 3
    assert asha.halving_levels() == rungs
    assert asha.grace_period == grace


def test_asha_never_judges_a_trial_before_a_ninth_of_its_budget():
    for trials in (4, 8, 16, 64, 1000):
        asha = resolved(trials, {"type": "asha"}, {"training_iteration": 90})
        assert asha.grace_period >= 90 // 9
        assert asha.max_t == 90


def test_the_median_rule_waits_a_third_of_the_budget_and_for_enough_trials():
    median = resolved(8, {"type": "median"}, {"training_iteration": 30})
    assert median.grace_period == 9
    assert median.min_samples_required == 4
    many = resolved(40, {"type": "median"}, {"training_iteration": 30})
    assert many.min_samples_required == 5
    assert isinstance(build_scheduler(median, {}), MedianStoppingRule)


def test_what_the_spec_sets_wins_and_without_a_budget_the_fallbacks_hold():
    own = resolved(100, {"type": "asha", "grace_period": 2}, {"training_iteration": 30})
    assert own.grace_period == 2
    assert own.max_t == 30
    wide = resolved(8, {"type": "asha", "grace_period": 50}, {"training_iteration": 30})
    assert wide.grace_period == 50
    assert wide.max_t == 50
    none = resolved(8, {"type": "asha"}, {})
    assert (none.grace_period, none.max_t, none.reduction_factor) == (1, 100, 3)
    fifo = resolved(8, {"type": "fifo"}, {"training_iteration": 30})
    assert fifo.grace_period is None


# The README's form: a scheduler named, a budget in env steps, nothing else.
README_ASHA = {"type": "asha"}


def test_a_scheduler_counts_in_the_unit_of_the_budget():
    asha = resolved(16, README_ASHA, {"timesteps_total": 50_000})
    assert asha.time_attr == "num_env_steps_sampled_lifetime"
    assert (asha.max_t, asha.grace_period) == (50_000, 16_667)
    assert asha.asha_milestones() == [16_667]
    median = resolved(16, {"type": "median"}, {"timesteps_total": 30_000})
    assert median.time_attr == "num_env_steps_sampled_lifetime"
    assert median.grace_period == 9_999
    by_time = resolved(16, README_ASHA, {"time_total_s": 600})
    assert (by_time.time_attr, by_time.max_t) == ("time_total_s", 600)


def test_env_steps_come_first_when_the_stop_criteria_give_several_budgets():
    both = resolved(8, README_ASHA, {"timesteps_total": 40_000, "training_iteration": 50})
    assert both.time_attr == "num_env_steps_sampled_lifetime"
    assert both.max_t == 40_000


def test_population_schedulers_and_an_own_time_attr_keep_their_unit():
    pbt = resolved(4, {"type": "pbt"}, {"timesteps_total": 50_000})
    assert pbt.time_attr == "training_iteration"
    own = resolved(8, {"type": "asha", "time_attr": "training_iteration"}, {"timesteps_total": 9})
    assert own.time_attr == "training_iteration"
    assert (own.grace_period, own.max_t) == (1, 100)  # no budget in iterations: fallbacks


def test_the_plan_shows_the_scheduler_in_force_and_what_was_derived():
    from tuner.spec import scheduler_in_force

    spec = parse_spec(
        {
            "name": "s",
            "algorithm": "PPO",
            "env": "CartPole-v1",
            "search": {"num_samples": 16},
            "scheduler": {"type": "asha", "reduction_factor": 3},
            "stop": {"timesteps_total": 50_000},
        }
    )
    shown = scheduler_in_force(spec, resolve_space(spec))
    assert shown["time_attr"] == "num_env_steps_sampled_lifetime"
    assert shown["rungs"] == [16_667]
    assert shown["max_t"] == 50_000
    assert shown["derived"] == ["time_attr", "grace_period", "max_t"]
    fifo = scheduler_in_force(parse_spec({**spec.model_dump(), "scheduler": {}}), {})
    assert fifo == {"type": "fifo", "derived": []}
    # pbt's unit is its fixed default, not the budget's: nothing is said to come from it
    pbt = scheduler_in_force(parse_spec({**spec.model_dump(), "scheduler": {"type": "pbt"}}), {})
    assert pbt["time_attr"] == "training_iteration"
    assert pbt["derived"] == []


def _warnings(
    scheduler: dict, stop: dict, config: dict | None = None, algorithm: str = "PPO", **fields: Any
) -> list[str]:
    from tuner.validation._issues import scheduler_warnings

    spec = parse_spec(
        {
            "name": "s",
            "algorithm": algorithm,
            "env": "CartPole-v1" if algorithm != "SAC" else "Pendulum-v1",
            "config": config or {},
            "search": {"num_samples": 8},
            "scheduler": scheduler,
            "stop": stop,
            **fields,
        }
    )
    return scheduler_warnings(spec, resolve_space(spec))


def test_the_readme_form_gets_no_warning():
    assert _warnings(README_ASHA, {"timesteps_total": 50_000}) == []


def test_a_time_attr_without_a_budget_in_its_unit_is_named():
    (warning,) = _warnings(
        {"type": "asha", "time_attr": "training_iteration"}, {"timesteps_total": 50_000}
    )
    assert warning.startswith("scheduler.time_attr training_iteration")
    assert "stop.timesteps_total (50000 env steps)" in warning
    assert "grace_period 1, max_t 100" in warning


def test_a_max_t_below_the_budget_is_named():
    (warning,) = _warnings({"type": "asha", "max_t": 10_000}, {"timesteps_total": 50_000})
    assert warning.startswith("scheduler.max_t (10000)")


def test_an_iteration_limit_that_ends_trials_before_their_env_steps_is_named():
    stop = {"timesteps_total": 50_000, "training_iteration": 10}
    (warning,) = _warnings(README_ASHA, stop, {"train_batch_size_per_learner": 1000})
    assert warning.startswith("stop.training_iteration (10) ends every trial at 10000 env steps")
    assert "needs 50 iterations" in warning
    assert _warnings(README_ASHA, stop, {"train_batch_size_per_learner": 5000}) == []


@pytest.mark.parametrize("scheduler", [{}, {"type": "median"}, {"type": "pbt"}])
def test_an_iteration_limit_is_named_whatever_the_scheduler(scheduler):
    stop = {"timesteps_total": 50_000, "training_iteration": 10}
    (warning,) = _warnings(scheduler, stop, {"train_batch_size_per_learner": 1000})
    assert warning.startswith("stop.training_iteration (10) ends every trial at 10000 env steps")


def test_the_default_spaces_smallest_rollout_is_the_one_named():
    # PPO's default space varies the rollout: the smallest one is cut first
    (warning,) = _warnings({}, {"timesteps_total": 50_000, "training_iteration": 5})
    assert "some trials (the smallest train_batch_size_per_learner)" in warning


def test_an_off_policy_iteration_is_counted_by_its_minimum_of_env_steps():
    # DQN's iteration samples at least min_sample_timesteps_per_iteration (RLlib: 1000)
    stop = {"timesteps_total": 50_000, "training_iteration": 20}
    (warning,) = _warnings({}, stop, {"lr": 1e-3}, algorithm="DQN")
    assert warning.startswith("stop.training_iteration (20) ends every trial at about 20000")
    assert "(min_sample_timesteps_per_iteration) it needs 50 iterations" in warning
    own = {"min_sample_timesteps_per_iteration": 5000}
    assert _warnings({}, stop, own, algorithm="DQN") == []


def test_an_iteration_that_runs_for_a_minimum_time_is_not_guessed():
    # SAC's iteration also runs for min_time_s_per_iteration (RLlib: 1 s): its size
    # depends on the machine, so no warning claims one
    stop = {"timesteps_total": 50_000, "training_iteration": 20}
    assert _warnings({}, stop, {"lr": 1e-3}, algorithm="SAC") == []


def _evaluated(interval: int, stop: dict, scheduler: dict | None = None) -> list[str]:
    """A PPO sweep ranked by an evaluation metric, evaluated every `interval` iterations."""
    return _warnings(
        README_ASHA if scheduler is None else scheduler,
        stop,
        {"train_batch_size_per_learner": 1000},
        metric="evaluation/env_runners/episode_return_mean",
        evaluation={"interval": interval},
    )


def test_an_evaluation_interval_past_the_budget_is_named():
    # 50 iterations of 1,000 env steps: an interval of 50 evaluates at the end only, so
    # ASHA never sees the metric before then and stops nothing early
    (warning,) = _evaluated(50, {"timesteps_total": 50_000})
    assert warning.startswith("evaluation.interval (50): the first evaluation comes at")
    assert "50000 env steps or more" in warning
    assert "asha never sees evaluation/env_runners/episode_return_mean" in warning
    assert _evaluated(49, {"timesteps_total": 50_000}) == []


def test_an_evaluation_interval_is_counted_in_iterations_for_an_iteration_budget():
    stop = {"training_iteration": 20}
    (warning,) = _evaluated(20, stop, {"type": "median"})
    assert "stop.training_iteration (20 iterations)" in warning
    assert _evaluated(10, stop, {"type": "median"}) == []


def test_fifo_is_not_warned_about_an_evaluation_interval():
    assert _evaluated(50, {"timesteps_total": 50_000}, {}) == []
