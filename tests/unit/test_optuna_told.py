"""What Optuna's study is told at a trial's end: the score the sweep ranks it by.

Where trials are ranked by their final deterministic evaluation (a budget with
`evaluation.at_end`, the default), TPE learns from that score, as the ranking, the
confirmation and a warm start do; a trial stopped before its budget is told as pruned.
Elsewhere it is told the metric's last value, as Tune's OptunaSearch tells it."""

from __future__ import annotations

import warnings

import optuna
import pytest
from ray.tune.search.optuna import OptunaSearch

from tuner.mlflow_names import ITERATION_KEY, STEP_KEY
from tuner.spec import parse_spec, resolve_space
from tuner.sweep import param_space
from tuner.sweep._tuner import OPTUNA_TOLD_SWITCH, _search_alg

TRAIN = "env_runners/episode_return_mean"
EVAL = f"evaluation/{TRAIN}"
BUDGET = 4_000


def spec(**extra):
    body = {
        "name": "told",
        "algorithm": "PPO",
        "env": "CartPole-v1",
        "search": {"method": "optuna", "num_samples": 4},
        "stop": {"timesteps_total": BUDGET},
        "seed": 0,
        **extra,
    }
    return parse_spec(body)


def searcher_of(s):
    space = resolve_space(s)
    searcher = _search_alg(s, space)
    # what Tune does with the searcher before the first trial
    assert searcher.set_search_properties(s.metric, s.mode, param_space(s, space))
    return searcher


def run_trial(searcher, trial_id: str, returns: list[float], final: dict) -> None:
    assert searcher.suggest(trial_id) is not None
    for i, value in enumerate(returns, start=1):
        searcher.on_trial_result(trial_id, {TRAIN: value, ITERATION_KEY: i, STEP_KEY: i * 1000})
    searcher.on_trial_complete(trial_id, final)


def told(searcher) -> list[tuple[optuna.trial.TrialState, float | None]]:
    return [(t.state, t.value) for t in searcher._ot_study.trials]


def test_a_trial_that_ran_its_budget_is_told_its_final_deterministic_score():
    searcher = searcher_of(spec())
    # its training return (stochastic actions) says 40; its final evaluation 500
    final = {TRAIN: 40.0, EVAL: 500.0, ITERATION_KEY: 4, STEP_KEY: BUDGET}
    run_trial(searcher, "a", [10.0, 20.0, 30.0, 40.0], final)
    assert told(searcher) == [(optuna.trial.TrialState.COMPLETE, 500.0)]
    # the training returns stay the study's intermediate values
    assert searcher._ot_study.trials[0].intermediate_values == {1: 10.0, 2: 20.0, 3: 30.0, 4: 40.0}


def test_a_trial_stopped_before_its_budget_is_told_as_pruned():
    searcher = searcher_of(spec(scheduler={"type": "asha"}))
    stopped = {TRAIN: 90.0, ITERATION_KEY: 2, STEP_KEY: 2000}  # no final evaluation
    run_trial(searcher, "a", [80.0, 90.0], stopped)
    # an evaluation that is not the final one (an interval evaluation) does not count
    early = {TRAIN: 95.0, EVAL: 300.0, ITERATION_KEY: 2, STEP_KEY: 2000}
    run_trial(searcher, "b", [85.0, 95.0], early)
    # Optuna keeps a pruned trial's last intermediate value (its training return); TPE
    # ranks pruned trials below every completed one
    assert told(searcher) == [
        (optuna.trial.TrialState.PRUNED, 90.0),
        (optuna.trial.TrialState.PRUNED, 95.0),
    ]


def test_ranked_by_an_evaluation_metric_the_study_still_gets_the_training_returns():
    # `metric: evaluation/...` only at the end: the training returns are the intermediate
    # values (a trial stopped at a rung keeps its last one, as with the default metric)
    searcher = searcher_of(spec(metric=EVAL, scope="last", scheduler={"type": "asha"}))
    stopped = {TRAIN: 90.0, ITERATION_KEY: 2, STEP_KEY: 2000}
    run_trial(searcher, "a", [80.0, 90.0], stopped)
    assert searcher._ot_study.trials[0].intermediate_values == {1: 80.0, 2: 90.0}
    assert told(searcher) == [(optuna.trial.TrialState.PRUNED, 90.0)]


@pytest.mark.parametrize(
    "extra",
    [
        {"evaluation": {"at_end": False}},  # ranked by the training return under scope
        {"metric": EVAL, "scope": "last"},  # ranked by the evaluation as a metric
    ],
)
def test_without_a_final_score_the_study_is_told_the_metrics_last_value(extra):
    s = spec(**extra)
    searcher = searcher_of(s)
    final = {TRAIN: 40.0, EVAL: 500.0, ITERATION_KEY: 4, STEP_KEY: BUDGET}
    run_trial(searcher, "a", [], final)
    assert told(searcher) == [(optuna.trial.TrialState.COMPLETE, final[s.metric])]


def test_a_searcher_pickled_before_the_ranking_was_kept_tells_as_tune_does():
    searcher = searcher_of(spec())
    del searcher.tuner_ranking  # the state of a sweep saved by an earlier version
    final = {TRAIN: 40.0, EVAL: 500.0, ITERATION_KEY: 4, STEP_KEY: BUDGET}
    run_trial(searcher, "a", [], final)
    assert told(searcher) == [(optuna.trial.TrialState.COMPLETE, 40.0)]


def test_the_comparison_switch_tells_the_last_training_return(monkeypatch):
    """TUNER_OPTUNA_TOLD=train (bench/sampler_ablation.py's `told-train` arm): the
    study learns from what Tune's OptunaSearch tells it, the last training return."""
    monkeypatch.setenv(OPTUNA_TOLD_SWITCH, "train")
    searcher = searcher_of(spec())
    final = {TRAIN: 40.0, EVAL: 500.0, ITERATION_KEY: 4, STEP_KEY: BUDGET}
    run_trial(searcher, "a", [10.0, 20.0, 30.0, 40.0], final)
    assert told(searcher) == [(optuna.trial.TrialState.COMPLETE, 40.0)]


def list_choice_warnings(caught) -> list[str]:
    return [str(w.message) for w in caught if "categorical distribution" in str(w.message)]


def test_a_sweep_with_list_choices_logs_no_optuna_storage_warning():
    """DQN's default space holds list choices (epsilon schedules, layer lists): Optuna's
    warning about persistent storage (the study is in memory) stays out of the log."""
    dqn = spec(algorithm="DQN")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        searcher = searcher_of(dqn)
        run_trial(searcher, "a", [10.0], {TRAIN: 10.0, ITERATION_KEY: 1, STEP_KEY: BUDGET})
        assert searcher.suggest("b") is not None
    assert list_choice_warnings(caught) == []


def test_optuna_itself_warns_about_those_list_choices():
    """The warning the searcher keeps out exists: Tune's own conversion of the same space
    raises it (if Optuna stops warning, the filter can go)."""
    dqn = spec(algorithm="DQN")
    flat = param_space(dqn, resolve_space(dqn))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        OptunaSearch.convert_search_space(flat)
    assert list_choice_warnings(caught)
