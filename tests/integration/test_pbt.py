"""PBT and PB2 on real Ray Tune and RLlib: after an exploit, the trial trains with the
perturbed value, read from the running algorithm (its optimizer's learning rate, read
before each update), not from Tune's idea of the trial's config.

Ray #62173: a trial that restores the cloned trial's checkpoint gets that trial's
optimizer state, learning rate included, so without `_SweepTrialMixin.load_checkpoint`
the first iteration after every exploit trains with the old value."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient
from ray.tune import Callback

from tests.conftest import tiny_spec
from tuner.mlflow_names import HPARAMS_PREFIX
from tuner.store import Store
from tuner.sweep import run_sweep
from tuner.tracking import StoreRecorder, TrackingConfig

pytestmark = pytest.mark.integration

LR = "default_policy/default_optimizer"


class ResultLog(Callback):
    """Every result the driver gets, one JSON line each (opened per line: callbacks are
    pickled with the run). Tune's result.json under the storage path is not the record
    here: it is copied there in batches, and full-suite runs found it without the
    iteration right after a restore, the one this test looks at."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def on_trial_result(self, iteration, trials, trial, result, **info) -> None:
        row = {
            "trial_id": trial.trial_id,
            "training_iteration": result["training_iteration"],
            "iterations_since_restore": result["iterations_since_restore"],
            "config": {k: result["config"][k] for k in ("lr", "clip_param")},
            "tuner": result["tuner"],
        }
        with open(self.path, "a") as out:
            out.write(json.dumps(row, default=str) + "\n")


def results_by_trial(log: Path) -> dict[str, list[dict]]:
    """Every trial's results, one dict per iteration, in the order they came."""
    out: dict[str, list[dict]] = {}
    for line in log.read_text().splitlines():
        row = json.loads(line)
        out.setdefault(row["trial_id"], []).append(row)
    return out


def exploits(experiment: Path) -> list[list]:
    """The scheduler's own log of exploits (PB2's too): [trial tag, cloned trial tag,
    trial iteration, cloned trial iteration, cloned config, new config] per line."""
    path = experiment / "pbt_global.txt"
    assert path.exists(), sorted(p.name for p in experiment.iterdir())
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.parametrize("scheduler", ["pbt", "pb2"])
def test_an_exploited_trial_trains_with_the_perturbed_values(ray_local, tmp_path, scheduler):
    spec = tiny_spec(
        search={
            "method": "random",
            "num_samples": 2,
            "space": {"lr": {"loguniform": [1e-4, 1e-2]}, "clip_param": {"uniform": [0.1, 0.3]}},
        },
        # ranked by the learning rate itself, so which trial is exploited does not hang on
        # CartPole's luck: the lower-lr trial clones the other every interval
        metric=f"learners/{LR}_learning_rate",
        scheduler={"type": scheduler, "perturbation_interval": 1},
        stop={"training_iteration": 5},
        checkpoint={"at_end": False, "num_to_keep": None},
        seed=1,
    )
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    store_url = f"sqlite:///{tmp_path / 'tuner.db'}"
    store = Store(store_url)
    record = store.create_experiment(name=spec.name, spec={}, warnings=[])
    space = list(spec.search.space)
    summary = run_sweep(
        spec,
        storage_path=tmp_path / "tune",
        progress=False,
        callbacks=[
            StoreRecorder(store_url, record.id, spec.metric, spec.mode, space, spec.seed),
            ResultLog(tmp_path / "results.jsonl"),
        ],
        tracking=TrackingConfig(tracking_uri=uri, artifact_location=(tmp_path / "a").as_uri()),
    )
    assert summary.status == "SUCCEEDED", summary.trials
    experiment = Path(summary.path)
    rows = results_by_trial(tmp_path / "results.jsonl")
    # both ran to the end (an exploited trial resumes at its clone's iteration, so it may
    # report fewer than 5 rows)
    last = {t: r[-1]["training_iteration"] for t, r in rows.items()}
    assert len(rows) == 2, last
    assert all(i >= 5 for i in last.values()), last

    # every iteration of every trial trained with the lr of the config it runs
    for trial_id, trial_rows in rows.items():
        for row in trial_rows:
            trained = row["tuner"]["optimizer_lr"][LR]
            assert trained == pytest.approx(row["config"]["lr"], rel=1e-6), (
                trial_id,
                row["training_iteration"],
                row["iterations_since_restore"],
            )

    logged = exploits(experiment)
    # an exploit whose explore landed on (about) the same lr tells nothing: PB2 can pick
    # the cloned value again, e.g. at a bound
    perturbed = [e for e in logged if e[5]["lr"] != pytest.approx(e[4]["lr"], rel=1e-3)]
    assert perturbed, logged
    for *_, cloned, new in logged:
        # only the searched keys change (Ray's own PB2 would drop every empty dict of
        # the RLlib config: tuner.sweep._pb2.TunerPB2)
        assert {k: v for k, v in new.items() if k not in space} == {
            k: v for k, v in cloned.items() if k not in space
        }
    # the trial restored from the clone's checkpoint and ran its next iteration with the
    # new values, where the checkpoint's optimizer state held the cloned lr (a trial
    # exploited again before it ran, on a loaded machine, never trains the first values:
    # at least one perturbation must show, and every one that ran; two explores of one
    # clone may share an lr and differ in clip_param, so a row is matched on both keys)
    shown = 0
    for _, _, _, clone_iteration, cloned, new in perturbed:
        after = [
            row
            for trial_rows in rows.values()
            for row in trial_rows
            if row["iterations_since_restore"] == 1
            and row["training_iteration"] == clone_iteration + 1
            and all(row["config"][key] == pytest.approx(new[key]) for key in space)
        ]
        shown += bool(after)
        for row in after:
            assert row["tuner"]["optimizer_lr"][LR] == pytest.approx(new["lr"], rel=1e-6)
            assert row["tuner"]["optimizer_lr"][LR] != pytest.approx(cloned["lr"], rel=1e-6)
    assert shown, (perturbed, {t: [r["training_iteration"] for r in v] for t, v in rows.items()})

    # what the sweep reports as a trial's values is what it ran with last: the summary,
    # and the store's row (the live view, rewritten each time a trial restarts)
    exploited = {
        trial_id
        for trial_id, trial_rows in rows.items()
        if len({row["config"]["lr"] for row in trial_rows}) > 1
    }
    assert exploited
    for view in summary.trials:
        last = rows[view.trial_id][-1]["config"]
        assert view.config == pytest.approx({k: last[k] for k in space})
        assert store.get_trial(record.id, view.trial_id).config == pytest.approx(view.config)
    # MLflow: params (write-once) keep the first values; hparams/<key> follows each
    # iteration's values
    client = MlflowClient(tracking_uri=uri)
    for view in summary.trials:
        first = rows[view.trial_id][0]["config"]
        params = client.get_run(view.mlflow_run_id).data.params
        assert float(params["lr"]) == pytest.approx(first["lr"])
        history = sorted(
            client.get_metric_history(view.mlflow_run_id, f"{HPARAMS_PREFIX}lr"),
            key=lambda m: (m.timestamp, m.step),
        )
        ran = [row["config"]["lr"] for row in rows[view.trial_id]]
        assert history
        assert all(any(m.value == pytest.approx(v) for v in ran) for m in history)
        assert history[-1].value == pytest.approx(ran[-1])
        if view.trial_id in exploited:
            assert len({m.value for m in history}) > 1, history
