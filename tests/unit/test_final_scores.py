"""Trials are judged as they will be used: with a budget, each trial that ran it is
scored by its final deterministic evaluation (evaluation.at_end, on by default); its
training return under scope stays beside it as train_score."""

from __future__ import annotations

import pandas as pd
import pytest

from tuner.spec import parse_spec
from tuner.sweep._summary import final_score, final_score_key

BASE = {"name": "s", "algorithm": "PPO", "env": "CartPole-v1"}
EVAL = "evaluation/env_runners/episode_return_mean"


def spec(**patch):
    return parse_spec({**BASE, **patch})


def test_a_budget_turns_the_final_deterministic_evaluation_on():
    assert spec(stop={"timesteps_total": 50_000}).evaluation.at_end is True
    assert spec(stop={"training_iteration": 10}).evaluation.at_end is True
    assert spec(stop={"time_total_s": 60}).evaluation.at_end is False
    own = spec(stop={"timesteps_total": 1000}, evaluation={"at_end": False})
    assert own.evaluation.at_end is False


def test_scores_come_from_the_final_evaluation_of_a_training_metric():
    assert final_score_key(spec(stop={"timesteps_total": 1000})) == EVAL
    assert final_score_key(spec(stop={"time_total_s": 60})) is None
    by_eval = spec(stop={"timesteps_total": 1000}, metric=EVAL, scope="last")
    assert final_score_key(by_eval) is None  # ranked by scope, as it is


def test_only_a_trial_that_ran_its_budget_has_a_final_score():
    s = spec(stop={"timesteps_total": 1000})
    ran = pd.DataFrame(
        {
            "num_env_steps_sampled_lifetime": [500, 1000],
            "training_iteration": [1, 2],
            EVAL: [None, 42.0],
        }
    )
    assert final_score(s, ran, EVAL) == 42.0
    stopped = pd.DataFrame(
        {"num_env_steps_sampled_lifetime": [500], "training_iteration": [1], EVAL: [17.0]}
    )
    assert final_score(s, stopped, EVAL) is None
    assert final_score(s, ran.drop(columns=[EVAL]), EVAL) is None


def objectives_spec(stop: dict) -> dict:
    """A spec ranked by an evaluation objective and a cost, with these stop criteria."""
    return {
        "name": "objectives",
        "algorithm": "PPO",
        "env": "CartPole-v1",
        "objectives": [
            {"metric": "evaluation/env_runners/episode_return_mean", "mode": "max"},
            {"metric": "time_total_s", "mode": "min"},
        ],
        "stop": stop,
    }


def test_an_evaluation_objective_takes_the_default_final_evaluation():
    """The default at_end is in place before the objectives are checked: an evaluation
    objective with a budget needs no evaluation section."""
    spec = parse_spec(objectives_spec({"timesteps_total": 30000}))
    assert spec.evaluation.at_end is True
    assert spec.metric == "evaluation/env_runners/episode_return_mean"
    # without a budget there is no final evaluation: the objective is refused, named
    with pytest.raises(ValueError, match=r"objectives.*needs evaluation"):
        parse_spec(objectives_spec({"time_total_s": 60}))


def test_an_evaluation_metrics_train_score_is_the_training_return_even_before_it_evaluated():
    """Tune's history of a trial ranked by `evaluation/...`: train_score is the training
    return under scope, whether or not the evaluation came (a trial stopped before it)."""
    from tuner.sweep._summary import _curve_values

    s = spec(stop={"timesteps_total": 1000}, metric=EVAL, scope="last")
    train = "env_runners/episode_return_mean"
    stopped = pd.DataFrame({train: [20.0, 30.0]})
    assert _curve_values(s, stopped) == (None, None, None, 30.0)
    ran = pd.DataFrame({train: [20.0, 30.0], EVAL: [None, 480.0]})
    assert _curve_values(s, ran) == (480.0, 480.0, 480.0, 30.0)
