"""Scheduler settings a spec leaves out follow its budget and its number of trials
(tuner/spec/scheduler_defaults.yaml): slow starters are not judged on luck."""

from __future__ import annotations

import pytest

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
    [(8, 1, 30_000), (16, 2, 10_000), (26, 2, 10_000), (27, 3, 3_333), (100, 3, 3_333)],
)
def test_asha_makes_as_many_rungs_as_its_trials_fill(trials, rungs, grace):
    asha = resolved(trials, STEPS, {"timesteps_total": 30_000})
    assert asha.max_t == 30_000 and asha.reduction_factor == 3
    assert asha.asha_rungs() == rungs and asha.grace_period == grace


def test_asha_never_judges_a_trial_before_a_ninth_of_its_budget():
    for trials in (4, 8, 16, 64, 1000):
        asha = resolved(trials, {"type": "asha"}, {"training_iteration": 90})
        assert asha.grace_period >= 90 // 9 and asha.max_t == 90


def test_the_median_rule_waits_a_third_of_the_budget_and_for_enough_trials():
    median = resolved(8, {"type": "median"}, {"training_iteration": 30})
    assert median.grace_period == 9 and median.min_samples_required == 4
    many = resolved(40, {"type": "median"}, {"training_iteration": 30})
    assert many.min_samples_required == 5
    assert type(build_scheduler(median, {})).__name__ == "MedianStoppingRule"


def test_what_the_spec_sets_wins_and_without_a_budget_the_fallbacks_hold():
    own = resolved(100, {"type": "asha", "grace_period": 2}, {"training_iteration": 30})
    assert own.grace_period == 2 and own.max_t == 30
    wide = resolved(8, {"type": "asha", "grace_period": 50}, {"training_iteration": 30})
    assert wide.grace_period == 50 and wide.max_t == 50
    none = resolved(8, {"type": "asha"}, {})
    assert (none.grace_period, none.max_t, none.reduction_factor) == (1, 100, 3)
    fifo = resolved(8, {"type": "fifo"}, {"training_iteration": 30})
    assert fifo.grace_period is None
