"""Scores and the best so far follow what ran: the store recorder computes each trial's
score (the metric under scope) and objective values from its whole curve at every result,
an earlier attempt's iterations included, and keeps the sweep's best search trial so far
in `best` while the sweep runs; the driver's final rows take the curve the store recorded
(after a resume Tune's own history of a trial holds only the iterations since)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tuner.results import scope_value
from tuner.spec import parse_spec
from tuner.store import MetricPoint, Store
from tuner.sweep import sweep_ranking
from tuner.tracking import Ranking, StoreRecorder
from tuner.views import ExperimentView, TrialView

METRIC = "env_runners/episode_return_mean"
EVAL = "evaluation/env_runners/episode_return_mean"
SPEC = {
    "name": "live",
    "algorithm": "PPO",
    "env": "CartPole-v1",
    "search": {"method": "random", "num_samples": 2, "space": {"lr": {"choice": [0.001, 0.01]}}},
    "stop": {"training_iteration": 16},
    "evaluation": {"at_end": False},  # ranked by the metric under scope
    "scope": "last-5-avg",
    "metric": METRIC,
    "mode": "max",
}


def result(it: int, ret: float | None = None, **extra: object) -> dict:
    runners = {"num_episodes": 0} if ret is None else {"episode_return_mean": ret}
    return {
        "training_iteration": it,
        "num_env_steps_sampled_lifetime": 100 * it,
        "env_runners": runners,
        **extra,
    }


def trial(i: int, lr: float = 0.001) -> SimpleNamespace:
    return SimpleNamespace(trial_id=f"t_{i:05d}", config={"lr": lr}, error_file=None)


@pytest.fixture
def sweep(tmp_path):
    url = f"sqlite:///{tmp_path / 'tuner.db'}"
    store = Store(url)
    spec = parse_spec(SPEC)
    exp = store.create_experiment(name="live", spec=SPEC, warnings=[])
    yield store, url, spec, exp.id
    store.close()


def recorder(url: str, exp_id: str, spec) -> StoreRecorder:
    return StoreRecorder(url, exp_id, spec.metric, spec.mode, ["lr"], spec.seed, spec=spec)


def test_a_resumed_trial_is_scored_on_its_whole_curve_and_the_best_follows(sweep):
    """A pb2-like resume: attempt 1 ran a trial to iteration 6 and its final rows were
    written (score of iteration 6); the resumed trial reports 7..16: its score, peak and
    the sweep's best (the list's score, "Best so far") are of its 16 iterations."""
    store, url, spec, exp_id = sweep
    first = recorder(url, exp_id, spec)
    a, b = trial(0), trial(1, 0.01)
    for t in (a, b):
        first.on_trial_start(0, [], t)
    for it in range(1, 7):
        first.on_trial_result(0, [], a, result(it, 10.0 * it))
        first.on_trial_result(0, [], b, result(it, 12.0 * it))
    at_six = store.get_trial(exp_id, a.trial_id).score
    assert at_six == pytest.approx(
        scope_value([10.0 * i for i in range(1, 7)], "last-5-avg", "max")
    )
    assert store.get_experiment(exp_id).best["trial_id"] == b.trial_id  # b leads at 6
    # b ended there (TERMINATED); a resumes (a new driver: a fresh recorder) and overtakes
    first.on_trial_complete(0, [], b)
    again = recorder(url, exp_id, spec)
    for it in range(7, 17):
        again.on_trial_result(0, [], a, result(it, 10.0 * it))
    again.on_trial_complete(0, [], a)
    row = store.get_trial(exp_id, a.trial_id)
    whole = [10.0 * i for i in range(1, 17)]
    assert row.score == pytest.approx(scope_value(whole, "last-5-avg", "max")) != at_six
    assert (row.best_metric, row.metric, row.iterations) == (160.0, 160.0, 16)
    best = store.get_experiment(exp_id).best
    assert best["trial_id"] == a.trial_id
    assert best["metric_value"] == pytest.approx(row.score)
    assert best["config"] == {"lr": 0.001}
    assert best["scope"] == "last-5-avg"
    assert best["full_config"]["lr"] == 0.001  # the fixed settings with the sampled values
    view = ExperimentView.from_record(store.get_experiment(exp_id), {})
    assert view.best.metric_value == pytest.approx(row.score)


def test_a_trial_restored_from_an_older_checkpoint_drops_the_iterations_it_trains_again(sweep):
    store, url, spec, exp_id = sweep
    rec = recorder(url, exp_id, spec)
    t = trial(0)
    for it, ret in [(1, 10.0), (2, 20.0), (3, 500.0), (4, 40.0)]:
        rec.on_trial_result(0, [], t, result(it, ret))
    rec.on_trial_result(0, [], t, result(3, 30.0))  # retried from its checkpoint at 2
    row = store.get_trial(exp_id, t.trial_id)
    assert row.score == pytest.approx((10 + 20 + 30) / 3)
    assert row.best_metric == 30.0


def test_an_at_end_evaluation_metric_is_the_best_so_far_as_soon_as_trials_end(sweep):
    """evaluation/... exists only in the result that evaluated (the at-end one): two
    trials that ended with it make a best so far while the sweep still runs."""
    store, url, _, exp_id = sweep
    spec = parse_spec(
        {**SPEC, "metric": EVAL, "scope": "last", "evaluation": {"at_end": True, "duration": 2}}
    )
    rec = recorder(url, exp_id, spec)
    for i, final in enumerate((300.0, 420.0)):
        t = trial(i)
        rec.on_trial_start(0, [], t)
        for it in range(1, 4):
            ev = {"evaluation": {"env_runners": {"episode_return_mean": final}}} if it == 3 else {}
            rec.on_trial_result(0, [], t, result(it, 5.0 * it, **ev))
            if it < 3 and i == 0:
                assert store.get_experiment(exp_id).best is None  # no value of it yet
        rec.on_trial_complete(0, [], t)
    rows = {r.trial_id: r for r in store.list_trials(exp_id)}
    assert [rows[f"t_{i:05d}"].score for i in (0, 1)] == [300.0, 420.0]
    best = store.get_experiment(exp_id).best
    assert (best["trial_id"], best["metric_value"]) == ("t_00001", 420.0)
    assert store.get_experiment(exp_id).status == "QUEUED"  # written live, not at the end


def test_a_tie_for_the_best_so_far_is_broken_as_the_summary_breaks_it(sweep, monkeypatch):
    """Two trials' final evaluations tie (CartPole's 500): the best so far is the one with
    the better training return, whatever their trial ids, as the driver's summary ranks
    them (tuner.results.search_rank) and its `best` then says."""
    from tuner.sweep import _summary

    store, url, _, exp_id = sweep
    spec = parse_spec(
        {**SPEC, "metric": EVAL, "scope": "last", "evaluation": {"at_end": True, "duration": 2}}
    )
    rec = recorder(url, exp_id, spec)
    for i, train in ((0, 400.0), (1, 500.0)):
        t = trial(i)
        rec.on_trial_start(0, [], t)
        ev = {"evaluation": {"env_runners": {"episode_return_mean": 500.0}}}
        rec.on_trial_result(0, [], t, result(1, train, **ev))
    best = store.get_experiment(exp_id).best
    assert (best["trial_id"], best["metric_value"], best["train_score"]) == (
        "t_00001",
        500.0,
        500.0,
    )
    views = [
        TrialView(
            trial_id=r.trial_id,
            status="TERMINATED",
            config=r.config,
            score=r.score,
            train_score=r.train_score,
            seed=r.seed,
        )
        for r in store.list_trials(exp_id)
    ]
    monkeypatch.setattr(_summary, "best_trial", lambda spec, view, config, ranked_by: view)
    chosen = _summary._choose_best(spec, views, {v.trial_id: {} for v in views}, False, "")
    assert chosen.trial_id == best["trial_id"]


def test_a_raced_searchs_best_so_far_is_its_configs_mean_not_a_lucky_seed(sweep):
    """search.race: while the sweep runs, "Best so far" ranks configs as the driver's
    summary does: a config's mean over its seeds, not one seed's luck."""
    store, url, _, exp_id = sweep
    spec = parse_spec(
        {
            **SPEC,
            "search": {**SPEC["search"], "method": "random", "race": {"seeds": 2}},
            "metric": EVAL,
            "scope": "last",
            "evaluation": {"at_end": True, "duration": 2},
            "seed": 7,
        }
    )
    rec = recorder(url, exp_id, spec)
    # config lr=0.001: seeds 7 and 8 score 500 and 100; lr=0.01: 350 and 330
    runs = [(0, 0.001, 0, 500.0), (1, 0.001, 1, 100.0), (2, 0.01, 0, 350.0), (3, 0.01, 1, 330.0)]
    for i, lr, index, final in runs:
        t = SimpleNamespace(
            trial_id=f"t_{i:05d}", config={"lr": lr, "_tuner_index": index}, error_file=None
        )
        rec.on_trial_start(0, [], t)
        ev = {"evaluation": {"env_runners": {"episode_return_mean": final}}}
        rec.on_trial_result(0, [], t, result(16, 5.0, **ev))
        rec.on_trial_complete(0, [], t)
        best = store.get_experiment(exp_id).best
        if i == 0:
            assert best["metric_value"] == 500.0  # one seed so far
        if i == 1:
            assert best["race"]["seeds"] == [7, 8]
            assert best["metric_value"] == pytest.approx(300.0)
    assert best["config"] == {"lr": 0.01}  # 340 over two seeds beats 300
    assert best["metric_value"] == pytest.approx(340.0)
    assert best["race"]["scores"] == [350.0, 330.0]
    assert best["trial_id"] == "t_00003"  # the worse of the two middle seeds


def test_a_raced_seed_that_ended_without_a_score_counts_as_stopped_live_too(sweep):
    """A config whose second seed ended short of its budget ranks below a config that
    ran its seeds without a stop, live as in the driver's summary."""
    store, url, _, exp_id = sweep
    spec = parse_spec(
        {
            **SPEC,
            "search": {**SPEC["search"], "race": {"seeds": 2}},
            "metric": EVAL,
            "scope": "last",
            "evaluation": {"at_end": True, "duration": 2},
        }
    )
    rec = recorder(url, exp_id, spec)
    ev = {"evaluation": {"env_runners": {"episode_return_mean": 300.0}}}
    lower = {"evaluation": {"env_runners": {"episode_return_mean": 250.0}}}
    runs = [(0, 0.001, 0, 16, ev), (1, 0.001, 1, 3, {}), (2, 0.01, 0, 16, lower)]
    for i, lr, index, iteration, extra in runs:
        t = SimpleNamespace(
            trial_id=f"t_{i:05d}", config={"lr": lr, "_tuner_index": index}, error_file=None
        )
        rec.on_trial_start(0, [], t)
        rec.on_trial_result(0, [], t, result(iteration, 5.0, **extra))
        rec.on_trial_complete(0, [], t)  # t_00001 stopped at iteration 3 of 16
    best = store.get_experiment(exp_id).best
    assert best["config"] == {"lr": 0.01}  # 250 on a whole race, above 300 and a stop


def test_objective_values_are_live_for_the_pareto_chart(sweep):
    store, url, _, exp_id = sweep
    objectives = [{"metric": METRIC, "mode": "max"}, {"metric": "time_total_s", "mode": "min"}]
    body = {k: v for k, v in SPEC.items() if k not in ("metric", "mode")}
    spec = parse_spec({**body, "objectives": objectives, "scope": "last"})
    rec = recorder(url, exp_id, spec)
    t = trial(0)
    rec.on_trial_result(0, [], t, result(1, 9.0, time_total_s=1.5))
    rec.on_trial_result(0, [], t, result(2, None, time_total_s=3.0))
    row = store.get_trial(exp_id, t.trial_id)
    assert row.values == {METRIC: 9.0, "time_total_s": 3.0}


def test_the_ranking_reads_a_curve_as_the_summary_reads_tunes_history():
    ranking = Ranking(METRIC, "min", "avg", ((METRIC, "min"), ("x", "max")))
    curve = [{}, {METRIC: 4.0}, {"x": 1.0}, {METRIC: 2.0, "x": 0.5}]
    numbers = ranking.of_curve([(i, 100 * i, v) for i, v in enumerate(curve, 1)])
    assert numbers == {
        "metric": 2.0,
        "best_metric": 2.0,
        "train_score": pytest.approx((4 + 4 + 2) / 3),
        "score": pytest.approx((4 + 4 + 2) / 3),
        "values": {METRIC: pytest.approx((4 + 4 + 2) / 3), "x": pytest.approx(0.75)},
    }
    assert Ranking(METRIC, "max").of_curve([(1, 0, {}), (2, 0, {})]) == {
        "metric": None,
        "best_metric": None,
        "train_score": None,
        "score": None,
    }


def test_ranked_by_the_final_evaluation_a_trial_that_ran_its_budget_has_its_score():
    """The summary's rule (tuner.sweep final_score): the final deterministic evaluation in
    the last result of a trial that ran its budget; none for one stopped short of it."""
    spec = parse_spec({**SPEC, "stop": {"timesteps_total": 300}, "evaluation": {"at_end": True}})
    ranking = sweep_ranking(spec)
    assert ranking.final_key == EVAL
    assert ranking.budget_steps == 300
    ran = [(1, 100, {METRIC: 5.0}), (2, 200, {METRIC: 7.0}), (3, 300, {METRIC: 9.0, EVAL: 500.0})]
    numbers = ranking.of_curve(ran)
    assert numbers["score"] == 500.0
    assert numbers["train_score"] == pytest.approx(7.0)
    assert ranking.of_curve(ran[:2])["score"] is None  # stopped short: ranks below


def test_an_evaluation_metric_keeps_the_training_return_as_train_score():
    """`metric: evaluation/...` ranks by the evaluation under scope; `train_score` is the
    training episodes' return under scope, as its name says, not the evaluation again."""
    ranking = Ranking(EVAL, "max", "last")
    assert METRIC in ranking.keys
    curve = [(1, 100, {METRIC: 20.0}), (2, 200, {METRIC: 30.0, EVAL: 480.0})]
    numbers = ranking.of_curve(curve)
    assert (numbers["score"], numbers["train_score"]) == (480.0, 30.0)


def test_while_no_trial_ran_its_budget_the_best_so_far_is_by_the_training_metric(sweep):
    store, url, _, exp_id = sweep
    spec = parse_spec({**SPEC, "stop": {"timesteps_total": 300}, "evaluation": {"at_end": True}})
    rec = StoreRecorder(
        url, exp_id, spec.metric, spec.mode, ["lr"], 0, spec=spec, ranking=sweep_ranking(spec)
    )
    a, b = trial(0), trial(1, 0.01)
    rec.on_trial_result(0, [], a, result(1, 50.0))
    rec.on_trial_result(0, [], b, result(1, 20.0))
    best = store.get_experiment(exp_id).best
    assert (best["trial_id"], best["metric_value"]) == (a.trial_id, 50.0)
    assert best["scope"] == "last-5-avg"  # a training score, named as one
    ev = {"evaluation": {"env_runners": {"episode_return_mean": 480.0}}}
    rec.on_trial_result(0, [], b, result(3, 30.0, **ev))  # b ran its budget: it has a score
    best = store.get_experiment(exp_id).best
    assert (best["trial_id"], best["metric_value"], best["train_score"]) == (
        b.trial_id,
        480.0,
        25.0,
    )
    assert best["scope"] == "final-evaluation"
    row = store.get_trial(exp_id, a.trial_id)
    assert (row.score, row.train_score) == (None, 50.0)


def test_the_recorder_pickles_without_its_caches(sweep):
    import pickle

    store, url, spec, exp_id = sweep
    rec = recorder(url, exp_id, spec)
    rec.on_trial_result(0, [], trial(0), result(1, 1.0))
    copy = pickle.loads(pickle.dumps(rec))
    assert copy._curves == {}
    assert copy._store is None
    assert copy.ranking == rec.ranking
    copy.on_trial_result(0, [], trial(0), result(2, 3.0))  # reads its curve back
    assert store.get_trial(exp_id, "t_00000").score == 2.0


def run_driver(monkeypatch, tmp_path, exp_id, feed, trials, best=None):
    """The driver's main on a stored sweep, its sweep a stand-in: `feed(recorder)` plays
    the results Tune would report, then the summary of `trials` (and `best`) is returned."""
    from tuner.sweep import __main__ as driver
    from tuner.sweep import _run
    from tuner.views import SweepSummary

    monkeypatch.setenv("TUNER_DATA_DIR", str(tmp_path))
    monkeypatch.setattr(driver, "watch_job_head", lambda: None)

    def fake_run_sweep(spec_, options):
        feed(options.callbacks[0])
        return SweepSummary(
            name="live", status="SUCCEEDED", metric=METRIC, mode="max", best=best, trials=trials
        )

    monkeypatch.setattr(_run, "run_sweep", fake_run_sweep)
    return driver.main([exp_id, "--resume"])


def test_the_driver_writes_final_scores_from_the_stores_curve(sweep, tmp_path, monkeypatch):
    """The driver's final rows after a resume: Tune's history of the resumed trial holds
    only its iterations since the resume (its summary score is stale), the store's curve
    holds all of them: the stored score and the best's follow the store."""
    from tuner.views import BestTrial, TrialView

    store, url, spec, exp_id = sweep
    a = trial(0)
    points = [
        MetricPoint(iteration=i, env_steps=100 * i, values={METRIC: 10.0 * i}) for i in range(1, 7)
    ]
    store.add_metric_points(exp_id, a.trial_id, points)
    store.upsert_trial(exp_id, a.trial_id, status="PAUSED", config={"lr": 0.001}, score=40.0)
    store.update_experiment(exp_id, status="RUNNING", attempts=2, job_id="j-2")

    def feed(rec):
        for it in range(7, 17):
            rec.on_trial_result(0, [], a, result(it, 10.0 * it))

    stale = TrialView(trial_id=a.trial_id, status="TERMINATED", iterations=16, score=40.0)
    best = BestTrial(trial_id=a.trial_id, config={"lr": 0.001}, metric_value=40.0)
    assert run_driver(monkeypatch, tmp_path, exp_id, feed, [stale], best) == 0
    rec = store.get_experiment(exp_id)
    whole = scope_value([10.0 * i for i in range(1, 17)], "last-5-avg", "max")
    assert store.get_trial(exp_id, a.trial_id).score == pytest.approx(whole)
    assert rec.status == "SUCCEEDED"
    assert rec.best["metric_value"] == pytest.approx(whole)
