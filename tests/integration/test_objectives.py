"""Several objectives: Optuna's multi-objective study steers the search, the sweep's
answer is the Pareto front (JSON, MLflow artifact and child-run tags), and `confirm`
re-runs the front's members and reports each one's confirmed values."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import tiny_spec
from tests.integration._tracking import child_runs, sqlite_tracking
from tuner.mlflow_names import PARETO_ARTIFACT, TAG_OBJECTIVES, TAG_PARETO, TAG_TRIAL
from tuner.results import dominates
from tuner.sweep import run_sweep

pytestmark = pytest.mark.integration

RETURN, TIME = "env_runners/episode_return_mean", "time_total_s"


def _searcher(experiment: str) -> dict:
    """The Optuna searcher's state Tune saved with the sweep."""
    state = sorted(Path(experiment).glob("searcher-state-*.pkl"))
    assert state, f"no searcher state in {experiment}"
    return pickle.loads(state[-1].read_bytes())


def test_a_sweep_of_two_objectives_answers_with_its_pareto_front(ray_local, tmp_path):
    tracking = sqlite_tracking(tmp_path)
    spec = tiny_spec(
        name="two-objectives",
        search={
            "method": "optuna",
            "num_samples": 4,
            "space": {
                "lr": {"loguniform": [1e-4, 1e-2]},
                "gamma": {"choice": [0.9, 0.99]},
            },
        },
        objectives=[{"metric": RETURN, "mode": "max"}, {"metric": TIME, "mode": "min"}],
        scope="last",
        stop={"training_iteration": 2},
        max_concurrent_trials=2,
        checkpoint={"at_end": True},
        confirm={"top_k": 2, "seeds": 2},
    )
    assert (spec.metric, spec.mode) == (RETURN, "max")  # Tune ranks by the first
    summary = run_sweep(
        spec, storage_path=tmp_path / "tune", name="mo", progress=False, tracking=tracking
    )
    assert summary.status == "SUCCEEDED", summary

    # Optuna's study has both directions and was told both values of every trial
    searcher = _searcher(summary.path.removeprefix("file://"))
    assert searcher["_metric"] == [RETURN, TIME]
    assert searcher["_mode"] == ["max", "min"]
    study = searcher["_ot_study"]
    assert [d.name for d in study.directions] == ["MAXIMIZE", "MINIMIZE"]
    told = [t for t in study.trials if t.values is not None]
    assert len(told) == 4
    assert all(len(t.values) == 2 for t in told)

    search = [t for t in summary.trials if t.stage == "search"]
    assert len(search) == 4
    for trial in search:  # each objective under scope `last`; the first is the score
        assert set(trial.values) == {RETURN, TIME}
        assert trial.values[RETURN] == trial.score == trial.metric
        assert trial.values[TIME] > 0
    front = summary.pareto
    assert front, "no Pareto front"
    on = {m.trial_id for m in front}
    points = {t.trial_id: [t.values[RETURN], t.values[TIME]] for t in search}
    for trial_id, point in points.items():  # the front is exactly the non-dominated trials
        beaten = any(dominates(q, point, ["max", "min"]) for q in points.values())
        assert (trial_id in on) == (not beaten), (trial_id, points)
    firsts = [m.values[RETURN] for m in front]
    assert firsts == sorted(firsts, reverse=True)  # best first objective first
    # best: the confirmed member with the best mean over fresh seeds (confirmation may
    # reorder the front), its search score as the search measured it
    best = summary.best
    assert best.source == "confirm"
    means = {c.trial_id: c.mean for c in summary.confirmation}
    assert best.trial_id in means
    assert means[best.trial_id] == max(means.values())
    assert best.confirmed.mean == means[best.trial_id]
    assert best.metric_value == points[best.trial_id][0]
    # the search's own best stays beside it: the front's first (best first objective)
    assert best.search_best.metric_value == front[0].values[RETURN]
    for member in front:
        assert member.values == {
            RETURN: points[member.trial_id][0],
            TIME: points[member.trial_id][1],
        }
        assert member.mlflow_run_id
        assert member.checkpoint

    # confirm re-ran the front's members (up to top_k) and reports each one's values
    confirmed = {c.trial_id: c for c in summary.confirmation}
    assert set(confirmed) == {m.trial_id for m in front[:2]}
    for member in front[:2]:
        c = confirmed[member.trial_id]
        assert member.confirmed is not None
        assert member.confirmed.trial_id == c.trial_id
        assert c.values is not None
        assert c.values[RETURN] == c.mean
        runs = [t for t in summary.trials if t.trial_id in c.trials]
        times = [t.values[TIME] for t in runs]
        assert len(times) == 2
        assert c.values[TIME] == pytest.approx(sum(times) / 2)

    # MLflow: pareto.json on the parent run, tuner.pareto on every search trial's run
    client = MlflowClient(tracking_uri=tracking.tracking_uri)
    parent = summary.mlflow.parent_run_id
    logged = json.loads(
        Path(client.download_artifacts(parent, PARETO_ARTIFACT, str(tmp_path))).read_text()
    )
    assert logged["objectives"] == [RETURN, TIME]
    assert [m["trial_id"] for m in logged["pareto"]] == [m.trial_id for m in front]
    assert client.get_run(parent).data.tags[TAG_OBJECTIVES] == f"{RETURN},{TIME}"
    flags = {
        r.data.tags[TAG_TRIAL]: r.data.tags.get(TAG_PARETO)
        for r in child_runs(tracking, summary)
        if r.data.tags.get("tuner.stage") == "search"
    }
    assert flags == {t: ("true" if t in on else "false") for t in points}


def test_objectives_with_random_search_still_answer_with_the_front(ray_local, tmp_path):
    spec = tiny_spec(
        name="random-objectives",
        search={"method": "grid", "space": {"lr": {"grid": [1e-4, 1e-3, 1e-2]}}},
        objectives=[{"metric": TIME, "mode": "min"}, {"metric": RETURN, "mode": "max"}],
        scope="last",
    )
    summary = run_sweep(spec, storage_path=tmp_path / "tune", progress=False)
    assert summary.status == "SUCCEEDED", summary
    assert summary.metric == TIME
    assert summary.best is not None
    fastest = min(summary.trials, key=lambda t: t.values[TIME])
    assert summary.pareto[0].trial_id == fastest.trial_id  # best first objective first
    assert summary.best.trial_id == fastest.trial_id  # best: by the first objective
