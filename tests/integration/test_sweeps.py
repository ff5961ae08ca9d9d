"""Real Ray Tune sweeps over real RLlib training, tiny budgets."""

from __future__ import annotations

import itertools

import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import TINY_PPO, tiny_spec
from tuner.rllib import evaluate_checkpoint
from tuner.spec import SpecError, resolve_space, scheduler_in_force
from tuner.sweep import run_sweep
from tuner.tracking import TrackingConfig

pytestmark = pytest.mark.integration


def run(spec, tmp_path):
    return run_sweep(spec, storage_path=tmp_path, progress=False)


def test_grid_sweep_runs_the_cartesian_product_num_samples_times(ray_local, tmp_path):
    spec = tiny_spec(
        search={
            "method": "grid",
            "num_samples": 2,
            "space": {"lr": {"grid": [1e-4, 1e-3]}, "gamma": {"grid": [0.9, 0.99]}},
        },
    )
    summary = run(spec, tmp_path)
    assert len(summary.trials) == 8
    combos = sorted((t.config["lr"], t.config["gamma"]) for t in summary.trials)
    assert combos == sorted(list(itertools.product([1e-4, 1e-3], [0.9, 0.99])) * 2)
    assert all(t.status == "TERMINATED" and t.iterations == 1 for t in summary.trials)
    assert sorted(t.seed for t in summary.trials) == list(range(8))
    assert summary.status == "SUCCEEDED"
    # one iteration each: the scope value is that iteration's, as is the peak; the score
    # is the final deterministic evaluation (on by default with a budget)
    assert summary.best
    assert summary.best.metric_value == max(t.score for t in summary.trials)
    assert all(t.train_score == t.best_metric == t.metric for t in summary.trials)
    assert summary.ranked_by == "evaluation/env_runners/episode_return_mean"
    assert summary.best.scope == "final-evaluation"  # the answer says what its score is


def test_random_sweep_samples_inside_bounds(ray_local, tmp_path):
    space = {
        "lr": {"loguniform": [1e-5, 1e-3]},
        "num_epochs": {"randint": [1, 2]},
        "clip_param": {"quniform": [0.1, 0.3, 0.05]},
        "model.fcnet_hiddens": {"choice": [[8], [16, 16]]},
    }
    # a key is fixed or searched, not both: the searched ones leave the base config
    config = {k: v for k, v in TINY_PPO.items() if k not in space}
    search = {"method": "random", "num_samples": 3, "space": space}
    spec = tiny_spec(config=config, model={}, search=search, seed=3)
    summary = run(spec, tmp_path)
    assert len(summary.trials) == 3
    from tuner.search_spaces import Domain

    for trial in summary.trials:
        for key, raw in space.items():
            assert Domain.model_validate(raw).contains(trial.config[key]), (key, trial.config)
    assert len({t.config["lr"] for t in summary.trials}) == 3
    assert sorted(t.seed for t in summary.trials) == [3, 4, 5]


def test_optuna_sweep(ray_local, tmp_path):
    spec = tiny_spec(
        search={
            "method": "optuna",
            "num_samples": 3,
            "space": {"lr": {"loguniform": [1e-5, 1e-3]}, "gamma": {"uniform": [0.9, 0.99]}},
        },
        max_concurrent_trials=1,
    )
    summary = run(spec, tmp_path)
    assert len(summary.trials) == 3
    for t in summary.trials:
        assert 1e-5 <= t.config["lr"] <= 1e-3
        assert 0.9 <= t.config["gamma"] <= 0.99
        assert t.status == "TERMINATED"
    # each trial its own seed: the spec's seed plus its place in the searcher's order,
    # not a number from Tune's random trial id
    assert sorted(t.seed for t in summary.trials) == [0, 1, 2]


def test_an_optuna_sweep_run_again_trains_the_same_trials(ray_local, tmp_path):
    """The same spec and seed: the same configs, seeds and returns on a second run."""
    spec = tiny_spec(
        search={
            "method": "optuna",
            "num_samples": 3,
            "space": {"lr": {"loguniform": [1e-5, 1e-3]}},
        },
        seed=7,
        max_concurrent_trials=1,
    )
    runs = []
    for name in ("first", "second"):
        summary = run(spec, tmp_path / name)
        runs.append(sorted((t.config["lr"], t.seed, t.metric) for t in summary.trials))
    assert runs[0] == runs[1]
    assert sorted(seed for _, seed, _ in runs[0]) == [7, 8, 9]


def test_a_raced_search_runs_configs_on_shared_seeds_and_confirms_the_races_best(
    ray_local, tmp_path
):
    """search.race through real Tune and Optuna: a config's seeds are seed, seed+1 (the
    same for every config), the first config always runs its second seed (nothing to
    trail yet), the answer's search score is its config's mean over its seeds, and the
    confirmation re-runs the race's best on seeds no search trial used. Two iterations:
    Tune hands the last result (the final evaluation's) to the searcher's
    on_trial_complete only, and a seed is scored by it."""
    spec = tiny_spec(
        stop={"training_iteration": 2},
        search={
            "method": "optuna",
            "num_samples": 5,
            "space": {"lr": {"loguniform": [1e-5, 1e-3]}},
            "race": {"seeds": 2},
        },
        seed=3,
        max_concurrent_trials=1,
        confirm={"top_k": 1, "seeds": 2},
    )
    summary = run(spec, tmp_path)
    search = [t for t in summary.trials if t.stage == "search"]
    assert len(search) == 5
    by_config: dict[float, list[int]] = {}
    for t in search:
        by_config.setdefault(t.config["lr"], []).append(t.seed)
    assert all(sorted(seeds) in ([3], [3, 4]) for seeds in by_config.values()), by_config
    assert [3, 4] in [sorted(s) for s in by_config.values()]
    best = summary.best
    assert best.source == "confirm"
    assert best.race is not None
    assert best.race.config == best.config
    assert sorted(best.race.seeds) == [3, 4]
    scores = [x for x in best.race.scores if x is not None]
    assert len(scores) == 2
    assert best.metric_value == pytest.approx(sum(scores) / len(scores))
    (confirmed,) = summary.confirmation
    assert confirmed.config == best.config
    assert not set(confirmed.seeds) & {3, 4}


def test_asha_stops_poor_trials_early(ray_local, tmp_path):
    # Ranked by the learning rate itself, so the order (and ASHA's cuts) is deterministic:
    # trials run one at a time, each later one is worse than the median of its rung.
    spec = tiny_spec(
        search={
            "method": "grid",
            "num_samples": 1,
            "space": {"lr": {"grid": [1e-3, 1e-4, 1e-5, 1e-6]}},
        },
        metric="learners/default_policy/default_optimizer_learning_rate",
        scheduler={"type": "asha", "grace_period": 1, "max_t": 3, "reduction_factor": 2},
        stop={"training_iteration": 3},
        max_concurrent_trials=1,
    )
    summary = run(spec, tmp_path)
    iterations = {t.config["lr"]: t.iterations for t in summary.trials}
    assert iterations[1e-3] == 3
    assert min(iterations.values()) < 3, iterations
    assert summary.best.config == {"lr": 1e-3}


BUDGET = 512  # env steps: 4 iterations of TINY_PPO


def asha_one_at_a_time(key: str, values: list, **patch):
    """A grid over `key`, one trial at a time, under the README's asha (halving rate 2)
    with a budget in env steps only: one rung at half the budget."""
    return tiny_spec(
        search={"method": "grid", "num_samples": 1, "space": {key: {"grid": values}}},
        scheduler={"type": "asha", "reduction_factor": 2},
        stop={"timesteps_total": BUDGET},
        max_concurrent_trials=1,
        **patch,
    )


def test_asha_as_the_readme_writes_it_counts_the_budget_in_env_steps(ray_local, tmp_path):
    # `scheduler: {type: asha}` and a budget in env steps only: ASHA's rungs lie in env
    # steps (6 trials at halving rate 2 make one rung at half the budget), every trial
    # reaches its budget unless that rung stops it. Ranked by the learning rate itself:
    # trials run one at a time, each later one worse than the median of its rung.
    budget, batch = BUDGET, TINY_PPO["train_batch_size_per_learner"]
    spec = asha_one_at_a_time(
        "lr",
        [1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8],
        metric="learners/default_policy/default_optimizer_learning_rate",
    )
    in_force = scheduler_in_force(spec, resolve_space(spec))
    assert in_force["time_attr"] == "num_env_steps_sampled_lifetime"
    assert in_force["rungs"] == [budget // 2, budget]
    summary = run(spec, tmp_path)
    steps = {t.config["lr"]: t.env_steps for t in summary.trials}
    assert steps[1e-3] >= budget  # the best reaches its budget
    for lr, done in steps.items():
        reached_budget = done >= budget
        stopped_at_the_rung = budget // 2 <= done < budget // 2 + batch
        assert reached_budget or stopped_at_the_rung, (lr, done)
    assert any(done < budget for done in steps.values()), steps  # the rung stopped some


def test_a_scheduler_judges_the_training_return_where_the_metric_is_a_final_evaluation(
    ray_local, tmp_path
):
    # ranked by the final evaluation, which no rung sees: ASHA judges the training return
    # (it stopped nothing before). LineEnv pays `reward` a step, so each later trial's
    # return is below all before it, and the rung at half the budget stops it.
    budget, batch = BUDGET, TINY_PPO["train_batch_size_per_learner"]
    spec = asha_one_at_a_time(
        "env_config.reward",
        [4.0, 3.0, 2.0, 1.0, 0.5, 0.25],
        env="tests.envs:LineEnv",
        metric="evaluation/env_runners/episode_return_mean",
    )
    in_force = scheduler_in_force(spec, resolve_space(spec))
    assert in_force["judged_on"] == "env_runners/episode_return_mean"
    summary = run(spec, tmp_path)
    steps = {t.config["env_config.reward"]: t.env_steps for t in summary.trials}
    assert steps[4.0] >= budget
    stopped = [r for r, done in steps.items() if budget // 2 <= done < budget // 2 + batch]
    assert stopped, steps
    assert summary.best.config == {"env_config.reward": 4.0}


def test_hyperband_s_last_bracket_runs_a_slow_starter_that_asha_would_stop(ray_local, tmp_path):
    # The asha test's ranking (the learning rate itself, each later trial worse than all
    # before it), over hyperband's two brackets: the 2nd and 4th trials are dealt to the
    # bracket that judges only at the budget, so they run it; in the first bracket the
    # rung at iteration 1 stops the 3rd, 5th and 6th.
    lrs = [1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8]
    spec = tiny_spec(
        search={"method": "grid", "num_samples": 1, "space": {"lr": {"grid": lrs}}},
        metric="learners/default_policy/default_optimizer_learning_rate",
        scheduler={"type": "hyperband", "grace_period": 1},
        stop={"training_iteration": 3},
        max_concurrent_trials=1,
    )
    brackets = scheduler_in_force(spec, resolve_space(spec))["brackets"]
    assert brackets == [{"rungs": [1, 3], "trials": 4}, {"rungs": [3], "trials": 2}]
    summary = run(spec, tmp_path)
    iterations = {t.config["lr"]: t.iterations for t in summary.trials}
    assert [iterations[lr] for lr in lrs] == [3, 3, 1, 3, 1, 1]


@pytest.mark.parametrize("env", ["tests.envs:LineEnv", "tests.envs:make_line_env"])
def test_custom_env_by_import_path_receives_env_config(ray_local, tmp_path, env):
    spec = tiny_spec(
        env=env,
        env_config={"length": 7, "reward": 2.0},
        search={"method": "random", "num_samples": 1, "space": {"lr": {"choice": [1e-4]}}},
    )
    summary = run(spec, tmp_path)
    (trial,) = summary.trials
    assert trial.status == "TERMINATED", trial.error
    assert trial.metric == pytest.approx(14.0)  # 7 steps x reward 2


def test_failing_trial_is_recorded_and_the_sweep_goes_on(ray_local, tmp_path):
    spec = tiny_spec(
        env="tests.envs:LineEnv",
        search={
            "method": "grid",
            "num_samples": 1,
            "space": {"env_config.nan_reward": {"grid": [False, True]}},
        },
    )
    summary = run(spec, tmp_path)
    by_nan = {t.config["env_config.nan_reward"]: t for t in summary.trials}
    assert by_nan[False].status == "TERMINATED"
    assert by_nan[True].status == "ERROR"
    assert "NaN" in by_nan[True].error
    assert "loss" in by_nan[True].error
    # retried max_failures (2) times, then ERROR: the sweep is PARTIAL, never a plain success
    assert by_nan[True].retries == 2
    assert by_nan[False].retries == 0
    assert summary.status == "PARTIAL"
    assert summary.best.trial_id == by_nan[False].trial_id
    assert any("failed for good" in w and by_nan[True].trial_id in w for w in summary.warnings)


def test_stop_on_target_ends_the_whole_sweep(ray_local, tmp_path):
    spec = tiny_spec(
        env="tests.envs:LineEnv",
        env_config={"length": 5},
        search={"method": "random", "num_samples": 4, "space": {"lr": {"choice": [1e-4]}}},
        stop={"episode_return_mean": 5, "stop_on_target": True, "training_iteration": 3},
        max_concurrent_trials=1,
        checkpoint={"at_end": True},
    )
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    summary = run_sweep(
        spec,
        storage_path=tmp_path / "tune",
        progress=False,
        tracking=TrackingConfig(tracking_uri=uri, artifact_location=(tmp_path / "a").as_uri()),
    )
    started = [t for t in summary.trials if t.iterations > 0]
    assert len(started) < 4
    # ended by its own rule, not interrupted: finished, nothing left to resume
    assert summary.status == "SUCCEEDED"
    assert all(t.status == "TERMINATED" for t in summary.trials), summary.trials
    assert started[0].iterations == 1
    assert started[0].metric == 5
    # Tune calls no on_trial_complete for trials the sweep's end stops: their MLflow runs
    # are still closed, with their checkpoints, and the best one evaluates.
    client = MlflowClient(tracking_uri=uri)
    run_ = client.get_run(started[0].mlflow_run_id)
    assert run_.info.status == "FINISHED"
    assert client.list_artifacts(run_.info.run_id, "checkpoints")
    assert evaluate_checkpoint(
        summary.mlflow.model_version, episodes=1, tracking_uri=uri
    ).returns == [5.0]


def test_trial_too_big_for_the_cluster_is_rejected_up_front(ray_local, tmp_path):
    with pytest.raises(SpecError) as exc:
        run(tiny_spec(resources={"num_env_runners": 3}), tmp_path)
    issue = exc.value.issues[0]
    assert issue.loc == "resources.num_env_runners"
    assert "CPU: 4" in issue.msg
    assert not any(tmp_path.iterdir())
