"""Where hyperparameter importance shows: the driver's summary, the live store (the service's
page and REST), the experiment view and the MLflow parent run."""

from __future__ import annotations

import json
import math
import random
from types import SimpleNamespace

import pandas as pd

from tuner import mlflow_names as names
from tuner.search_spaces import Domain
from tuner.spec import ExperimentSpec
from tuner.store import Store
from tuner.views import ExperimentView, SweepSummary, TrialView

METRIC = "env_runners/episode_return_mean"
SPACE = {
    "lr": Domain(loguniform=(1e-5, 1e-2)),
    "gamma": Domain(choice=[0.98, 0.99, 0.995]),
    "num_epochs": Domain(randint=(1, 10)),
}


def configs(n: int, seed: int = 0) -> list[tuple[dict, float]]:
    """Sampled configs and a return that only lr drives."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        lr = 10 ** rng.uniform(-5, -2)
        config = {
            "lr": lr,
            "gamma": rng.choice([0.98, 0.99, 0.995]),
            "num_epochs": rng.randint(1, 10),
        }
        out.append((config, 100 - 40 * (math.log10(lr) + 3.5) ** 2 + rng.gauss(0, 3)))
    return out


def spec() -> ExperimentSpec:
    return ExperimentSpec(
        name="imp",
        algorithm="PPO",
        env="CartPole-v1",
        metric=METRIC,
        search={"method": "random", "num_samples": 12, "space": SPACE},
    )


class Grid(list):
    """What summarise reads of a Tune ResultGrid."""

    experiment_path = "/tmp/imp"


def result(i: int, config: dict, value: float, **extra: object) -> SimpleNamespace:
    class NoBest:
        @staticmethod
        def get_best_checkpoint(metric: str, mode: str) -> None:
            return None

    ns = SimpleNamespace(
        metrics={"training_iteration": 2, "done": True, "trial_id": f"t_{i:05d}"},
        path=f"/tmp/imp/t_{i:05d}",
        metrics_dataframe=pd.DataFrame({METRIC: [value - 10, value]}),
        error=None,
        config=config,
        checkpoint=None,
        filesystem=None,
        get_best_checkpoint=NoBest.get_best_checkpoint,
    )
    ns.__dict__.update(extra)
    return ns


def test_the_summary_ranks_the_search_trials_by_score():
    from tuner.sweep import summarise

    grid = Grid(result(i, c, v) for i, (c, v) in enumerate(configs(30)))
    summary = summarise(spec(), grid, space=SPACE)
    assert list(summary.importance)[0] == "lr"
    assert summary.importance["lr"] > 0.6
    assert list(summary.importance_ped_anova)[0] == "lr"
    assert set(summary.importance) == set(SPACE)
    # the confirmation stage's summary has none of its own
    stage = summarise(spec(), grid, space=dict.fromkeys(SPACE), confirming=True)
    assert stage.importance == {}
    assert stage.importance_ped_anova == {}
    # too few finished trials: nothing to say yet
    assert summarise(spec(), Grid(list(grid)[:3]), space=SPACE).importance == {}


def test_the_store_recorder_keeps_a_live_importance(tmp_path):
    from tuner.tracking import StoreRecorder

    url = f"sqlite:///{tmp_path / 'tuner.db'}"
    store = Store(url)
    exp = store.create_experiment(name="live", spec={}, warnings=[])
    recorder = StoreRecorder(url, exp.id, METRIC, "max", SPACE, 0)
    assert json.loads(json.dumps(recorder.space)) == recorder.space  # plain data
    for i, (config, value) in enumerate(configs(12)):
        trial = SimpleNamespace(trial_id=f"t_{i:05d}", config=config, error_file=None)
        recorder.on_trial_start(0, [], trial)
        recorder.on_trial_result(
            0, [], trial, {"training_iteration": 1, "env_runners": {"episode_return_mean": value}}
        )
        recorder.on_trial_complete(0, [], trial)
        rec = store.get_experiment(exp.id)
        if i < 3:  # fewer than 4 finished
            assert rec.importance is None
    assert list(rec.importance)[0] == "lr"
    assert set(rec.importance_ped_anova) == set(SPACE)
    view = ExperimentView.from_record(rec, store.trial_counts(exp.id))
    assert view.importance == rec.importance
    assert view.model_dump(mode="json")["importance"] == rec.importance
    # a recorder without a space (a Tune state pickled before it) records nothing
    old = StoreRecorder(url, exp.id, METRIC, "max", list(SPACE), 0)
    del old.__dict__["space"]
    old.on_trial_complete(0, [], SimpleNamespace(trial_id="t_00000", config={}))
    store.close()


def test_the_mlflow_parent_run_gets_metrics_and_the_artifact():
    from tuner.tracking._mlflow_report import _log_importance

    logged: dict = {"metrics": [], "texts": {}}
    tracker = SimpleNamespace(
        parent_run_id="p",
        client=SimpleNamespace(
            log_text=lambda run, text, path: logged["texts"].__setitem__(path, json.loads(text))
        ),
        runs=SimpleNamespace(log=lambda run, metrics=(), **_: logged["metrics"].extend(metrics)),
    )
    summary = SweepSummary(
        name="imp",
        status="SUCCEEDED",
        metric=METRIC,
        mode="max",
        importance={"lr": 0.9, "model.fcnet_hiddens": 0.1},
        importance_ped_anova={"lr": 0.7, "model.fcnet_hiddens": 0.3},
    )
    _log_importance(tracker, summary)
    assert {m.key: m.value for m in logged["metrics"]} == {
        names.importance_metric("lr"): 0.9,
        names.importance_metric("model.fcnet_hiddens"): 0.1,
    }
    assert names.importance_metric("lr") == "importance.lr"
    assert logged["texts"][names.IMPORTANCE_ARTIFACT] == {
        "metric": METRIC,
        "mode": "max",
        "importance": {"lr": 0.9, "model.fcnet_hiddens": 0.1},
        "importance_ped_anova": {"lr": 0.7, "model.fcnet_hiddens": 0.3},
    }
    logged["metrics"].clear()
    _log_importance(tracker, SweepSummary(name="x", status="FAILED", metric=METRIC, mode="max"))
    assert logged["metrics"] == []


def test_trial_views_count_only_finished_search_trials():
    from tuner.importance import sweep_importance

    trials = [
        TrialView(trial_id=f"t_{i:05d}", status="TERMINATED", config=c, score=v)
        for i, (c, v) in enumerate(configs(4))
    ]
    assert sweep_importance(trials, SPACE, "max")["importance"]
    trials[0].status = "RUNNING"
    assert sweep_importance(trials, SPACE, "max") == {"importance": {}, "importance_ped_anova": {}}
    trials[0].status, trials[1].stage = "TERMINATED", "confirm"
    assert sweep_importance(trials, SPACE, "max")["importance"] == {}
