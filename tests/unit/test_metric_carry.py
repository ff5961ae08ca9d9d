"""A trial whose last iteration finished no episode keeps the metric's last value (the
store and the CLI summary both), never null once an episode has finished."""

from __future__ import annotations

from types import SimpleNamespace

from tuner.store import Store
from tuner.sweep._summary import trial_view_from_result
from tuner.tracking import StoreRecorder

METRIC = "env_runners/episode_return_mean"


def result(it: int, ret: float | None) -> dict:
    runners = {"num_episodes": 0} if ret is None else {"episode_return_mean": ret}
    return {
        "training_iteration": it,
        "num_env_steps_sampled_lifetime": 100 * it,
        "env_runners": runners,
    }


def recording(tmp_path) -> tuple[Store, str, StoreRecorder, SimpleNamespace]:
    """A store, a sweep in it, its recorder and one started trial."""
    url = f"sqlite:///{tmp_path / 'tuner.db'}"
    store = Store(url)
    exp = store.create_experiment(name="carry", spec={}, warnings=[])
    recorder = StoreRecorder(url, exp.id, METRIC, "max", [], 0)
    trial = SimpleNamespace(trial_id="t_00000", config={})
    recorder.on_trial_start(0, [], trial)
    return store, exp.id, recorder, trial


def test_the_store_carries_the_last_value_over_iterations_without_episodes(tmp_path):
    store, exp_id, recorder, trial = recording(tmp_path)
    url = f"sqlite:///{tmp_path / 'tuner.db'}"
    for it, ret in [(1, None), (2, -900.0), (3, -700.0), (4, None)]:
        recorder.on_trial_result(0, [], trial, result(it, ret))
        row = store.get_trial(exp_id, trial.trial_id)
        if it == 1:
            assert row.metric is None  # no episode yet: nothing to show
    assert (row.metric, row.best_metric, row.iterations) == (-700.0, -700.0, 4)
    # a new driver (a resume) picks the carried value up from the store
    again = StoreRecorder(url, exp_id, METRIC, "max", [], 0)
    again.on_trial_result(0, [], trial, result(5, None))
    assert store.get_trial(exp_id, trial.trial_id).metric == -700.0
    store.close()


def test_the_summary_view_takes_the_last_value_that_was_reported():
    view = trial_view_from_result(
        "t_00001",
        "TERMINATED",
        result(4, None),
        sampled={},
        metric=METRIC,
        base_seed=0,
        last_metric=-700.0,
    )
    assert view.metric == -700.0
    assert view.seed == 1


def test_the_store_and_the_summary_name_the_cpu_a_trial_trained_on(tmp_path):
    store, exp_id, recorder, trial = recording(tmp_path)
    first = {**result(1, -900.0), "tuner": {"device": "cpu", "cpu": "Some CPU, AVX2 kernels"}}
    recorder.on_trial_result(0, [], trial, first)
    assert store.get_trial(exp_id, trial.trial_id).cpu == "Some CPU, AVX2 kernels"
    store.close()
    view = trial_view_from_result(
        "t_00000", "TERMINATED", first, sampled={}, metric=METRIC, base_seed=0
    )
    assert view.cpu == "Some CPU, AVX2 kernels"
