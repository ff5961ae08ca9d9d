"""Evaluation as the policy is used: deterministic actions, and `evaluation.at_end`, a
final evaluation inside each trial when its budget is spent, which ranks the trials
and scores a confirmation's seeds."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from tests.conftest import tiny_spec
from tuner.sweep import run_sweep

pytestmark = pytest.mark.integration

# two trials drawn by Optuna
OPTUNA_TWO = {"method": "optuna", "num_samples": 2, "space": {"lr": {"loguniform": [1e-4, 1e-2]}}}


class Results:
    """Every result of every trial, as Tune hands them to callbacks."""

    def __init__(self) -> None:
        from ray import tune

        outer = self
        self.by_trial: dict[str, list[dict]] = {}

        class Collect(tune.Callback):
            def on_trial_result(self, iteration, trials, trial, result, **info):
                outer.by_trial.setdefault(trial.trial_id, []).append(result)

        self.callback = Collect()


def test_at_end_evaluates_once_when_the_budget_is_spent_and_ranks_by_it(ray_local, tmp_path):
    results = Results()
    spec = tiny_spec(
        name="at-end",
        search={"method": "grid", "space": {"lr": {"grid": [1e-3, 3e-4]}}},
        stop={"timesteps_total": 300},  # 128 a batch: the third iteration ends it
        evaluation={"at_end": True, "duration": 2},
        metric="evaluation/env_runners/episode_return_mean",
        scope="last",
        confirm={"top_k": 1, "seeds": 2},
    )
    summary = run_sweep(
        spec, storage_path=tmp_path / "tune", progress=False, callbacks=[results.callback]
    )
    assert summary.status == "SUCCEEDED", summary
    search = [t for t in summary.trials if t.stage == "search"]
    assert len(search) == 2
    for trial in search:
        history = results.by_trial[trial.trial_id]
        evaluated = [r for r in history if "evaluation" in r]
        # only the last iteration evaluates, and only once its env steps reach 300
        assert [r["training_iteration"] for r in evaluated] == [len(history)] == [3]
        final = evaluated[0]["evaluation"]["env_runners"]
        assert final["num_episodes"] == 2
        assert trial.score == final["episode_return_mean"] == trial.metric
        # train_score: the training episodes' return under scope (last), as named
        assert trial.train_score == history[-1]["env_runners"]["episode_return_mean"]
    best = max(search, key=lambda t: t.score)
    assert summary.best.trial_id == best.trial_id
    (confirmed,) = summary.confirmation
    runs = {t.trial_id: t for t in summary.trials}
    # each seed's score is its own final evaluation, in its trial
    assert confirmed.scores == [runs[t].metric for t in confirmed.trials]
    assert all(s is not None for s in confirmed.scores)


def test_evaluation_plays_the_policy_deterministically(ray_local):
    """RLlib evaluates with `explore` as the training env runners do (stochastic) unless
    told otherwise: every evaluation a spec asks for is deterministic."""
    from tuner.rllib import build_config

    built = build_config(tiny_spec(evaluation={"interval": 2}))
    assert built.get_evaluation_config_object().explore is False
    assert built.explore is True  # training still explores
    at_end = build_config(tiny_spec(evaluation={"at_end": True}, stop={"training_iteration": 2}))
    # RLlib never evaluates on its own, nor builds an evaluation runner: the trial plays
    # its final policy as `tuner evaluate` does, deterministic, at the end of its budget
    assert not at_end.evaluation_interval
    assert at_end.evaluation_num_env_runners == 0


def test_optuna_learns_from_the_final_evaluation(ray_local, tmp_path):
    """Tune's OptunaSearch raised a KeyError on every result without the metric (an
    evaluation metric exists only where a trial evaluates): the sweep ended. Ours tells
    Optuna each trial's final evaluation."""
    spec = tiny_spec(
        name="at-end-optuna",
        search=OPTUNA_TWO,
        stop={"timesteps_total": 300},
        evaluation={"at_end": True, "duration": 2},
        metric="evaluation/env_runners/episode_return_mean",
        scope="last",
    )
    summary = run_sweep(spec, storage_path=tmp_path / "tune", progress=False)
    assert summary.status == "SUCCEEDED", summary
    assert len(summary.trials) == 2
    assert all(t.status == "TERMINATED" and t.iterations == 3 for t in summary.trials)
    assert all(t.score is not None and t.score == t.metric for t in summary.trials)


def test_optuna_is_told_each_trials_score_the_final_deterministic_evaluation(ray_local, tmp_path):
    """The spec a user writes (a training metric, a budget): TPE learns from the number
    trials are ranked by, not from the training return (stochastic actions)."""
    spec = tiny_spec(
        name="told-score",
        search=OPTUNA_TWO,
        stop={"timesteps_total": 300},
    )
    assert spec.evaluation.at_end is True
    summary = run_sweep(spec, storage_path=tmp_path / "tune", progress=False)
    assert summary.status == "SUCCEEDED", summary
    experiment = Path(summary.path.removeprefix("file://"))
    state = sorted(experiment.glob("searcher-state-*.pkl"))
    assert state, f"no searcher state in {experiment}"
    study = pickle.loads(state[-1].read_bytes())["_ot_study"]
    told = sorted(t.value for t in study.trials if t.state.name == "COMPLETE")
    assert len(told) == 2
    assert told == sorted(t.score for t in summary.trials)
    # the training returns went along as intermediate values (Tune's OptunaSearch)
    assert all(trial.intermediate_values for trial in study.trials)


def test_by_default_a_budget_ranks_trials_by_their_final_deterministic_evaluation(
    ray_local, tmp_path
):
    # the spec a user writes: a training metric and a budget, no evaluation section
    results = Results()
    spec = tiny_spec(
        name="default-final",
        search={"method": "grid", "space": {"lr": {"grid": [1e-3, 3e-4]}}},
        stop={"timesteps_total": 300},  # 128 a batch: the third iteration ends it
        confirm={"top_k": 1, "seeds": 2},
    )
    assert spec.evaluation.at_end is True
    summary = run_sweep(
        spec, storage_path=tmp_path / "tune", progress=False, callbacks=[results.callback]
    )
    assert summary.status == "SUCCEEDED", summary
    assert summary.ranked_by == "evaluation/env_runners/episode_return_mean"
    search = [t for t in summary.trials if t.stage == "search"]
    for trial in search:
        history = results.by_trial[trial.trial_id]
        final = history[-1]["evaluation"]["env_runners"]["episode_return_mean"]
        assert trial.score == final  # the deterministic policy's return
        training = [r["env_runners"]["episode_return_mean"] for r in history]
        assert trial.train_score == pytest.approx(sum(training) / len(training))
    best = max(search, key=lambda t: t.score)
    assert summary.best.search_best.trial_id == best.trial_id
    (confirmed,) = summary.confirmation
    runs = {t.trial_id: t for t in summary.trials}
    # each confirmation seed is scored by its own final deterministic evaluation
    assert confirmed.scores == [runs[t].score for t in confirmed.trials]
    assert all(runs[t].score != runs[t].train_score for t in confirmed.trials)
