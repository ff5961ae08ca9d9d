"""`search.warm_start`: an earlier sweep, read back from MLflow, seeds a new one: its
best configs run first (as ordinary trials), Optuna learns from its finished trials, and
what this space cannot take is dropped and said."""

from __future__ import annotations

import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import tiny_spec
from tuner.mlflow_names import TAG_WARM_FROM, TAG_WARM_RUN
from tuner.spec import SpecError
from tuner.sweep import run_sweep
from tuner.tracking import TrackingConfig

pytestmark = pytest.mark.integration


def test_a_warm_start_runs_the_earlier_best_first_and_drops_what_does_not_fit(ray_local, tmp_path):
    tracking = TrackingConfig(
        tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}",
        artifact_location=(tmp_path / "artifacts").as_uri(),
    )
    earlier = run_sweep(
        tiny_spec(
            name="cold",
            search={
                "method": "random",
                "num_samples": 3,
                "space": {
                    "lr": {"loguniform": [1e-4, 1e-3]},
                    "gamma": {"choice": [0.9, 0.99]},
                },
            },
            seed=3,
        ),
        storage_path=tmp_path / "tune",
        name="cold-run",
        progress=False,
        tracking=tracking,
    )
    assert earlier.status == "SUCCEEDED", earlier
    best_first = sorted(earlier.trials, key=lambda t: -t.score)
    spec = tiny_spec(
        name="warm",
        search={
            "method": "optuna",
            "num_samples": 3,
            "space": {
                "lr": {"loguniform": [1e-4, 1e-3]},
                "gamma": {"choice": [0.9, 0.95]},  # 0.99 is outside: dropped where sampled
            },
            "warm_start": {"from": "cold-run", "top_k": 2},
        },
        seed=5,
    )
    warm = run_sweep(
        spec, storage_path=tmp_path / "tune", name="warm-run", progress=False, tracking=tracking
    )
    assert warm.status == "SUCCEEDED", warm
    trials = sorted(warm.trials, key=lambda t: t.trial_id)
    # the earlier best two configs ran (first: Optuna hands out its queued points before
    # it samples), their lr as it was, gamma where this space has the earlier value
    ran = {round(t.config["lr"], 12): t.config["gamma"] for t in trials}
    for source in best_first[:2]:
        assert round(source.config["lr"], 12) in ran, (source.config, ran)
        if source.config["gamma"] == 0.9:
            assert ran[round(source.config["lr"], 12)] == 0.9
        else:  # 0.99 is outside this space: the middle choice instead
            assert ran[round(source.config["lr"], 12)] == 0.95
    assert round(best_first[2].config["lr"], 12) not in ran  # top_k 2
    said = " ".join(warm.warnings)
    assert "2 of its 3 finished configs run first" in said
    if any(t.config["gamma"] == 0.99 for t in earlier.trials):
        assert "dropped gamma (a value outside choice[0.9, 0.95])" in said
    parent = MlflowClient(tracking_uri=tracking.tracking_uri).get_run(warm.mlflow.parent_run_id)
    assert parent.data.tags[TAG_WARM_FROM] == "cold-run"
    assert parent.data.tags[TAG_WARM_RUN] == earlier.mlflow.parent_run_id

    # the sweep's name (its MLflow experiment) finds its latest finished sweep too; another
    # algorithm's sweep is refused, naming the field
    other = tiny_spec(
        name="other",
        algorithm="APPO",
        config={},
        search={"method": "random", "num_samples": 1, "warm_start": {"from": "cold"}},
    )
    with pytest.raises(SpecError) as err:
        run_sweep(other, storage_path=tmp_path / "tune", progress=False, tracking=tracking)
    (issue,) = err.value.issues
    assert issue.loc == "search.warm_start.from"
    assert "same algorithm" in issue.msg
    missing = tiny_spec(name="m", search={"warm_start": {"from": "no-such-sweep"}})
    with pytest.raises(SpecError) as err:
        run_sweep(missing, storage_path=tmp_path / "tune", progress=False, tracking=tracking)
    assert "no sweep named 'no-such-sweep'" in err.value.issues[0].msg


def test_plan_shows_what_a_warm_start_reuses_and_refuses_a_missing_source(ray_local, tmp_path):
    """`tuner plan` (and the API's dry run, through the same pipeline) looks the earlier
    sweep up in MLflow: the configs that will run first; a source that is not there is a
    problem on search.warm_start.from before anything runs."""
    from tuner.validation import Checks, check_source

    tracking = TrackingConfig(
        tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}",
        artifact_location=(tmp_path / "artifacts").as_uri(),
    )
    space = {"lr": {"loguniform": [1e-4, 1e-3]}}
    earlier = run_sweep(
        tiny_spec(name="first", search={"method": "random", "num_samples": 2, "space": space}),
        storage_path=tmp_path / "tune",
        name="first-run",
        progress=False,
        tracking=tracking,
    )
    best = max(earlier.trials, key=lambda t: t.score)
    text = (
        "name: again\nalgorithm: PPO\nenv: CartPole-v1\n"
        "config: {train_batch_size_per_learner: 128, minibatch_size: 64, num_epochs: 1}\n"
        "search: {method: optuna, num_samples: 2, space: {lr: {loguniform: [1.0e-4, 1.0e-3]}},"
        " warm_start: {from: first, top_k: 1}}\nstop: {training_iteration: 1}\n"
    )
    checks = Checks(build_env=False, plan=True, tracking_uri=tracking.tracking_uri)
    checked = check_source(text, True, checks)
    assert checked.ok, checked.issues
    reused = checked.plan.warm_start
    assert reused["from"] == "first-run"
    assert reused["parent_run_id"] == earlier.mlflow.parent_run_id
    assert reused["first"] == [{"lr": best.config["lr"]}]
    assert reused["told_to_optuna"] == 2
    missing = check_source(text.replace("from: first,", "from: nowhere,"), True, checks)
    assert [i.loc for i in missing.issues] == ["search.warm_start.from"]
