"""Tune storage on an object store: `TUNER_STORAGE_PATH=s3://...`.

The S3 API is served on localhost by moto's server (the machine is offline, so no
cloud bucket); pyarrow, Tune and the trials talk to it over HTTP exactly as they would
to S3 (`AWS_ENDPOINT_URL`). A sweep killed mid-run resumes from the checkpoints in the
bucket, and the paths it reports carry the `s3://` scheme.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import time

import pytest
import yaml
from mlflow.tracking import MlflowClient

from tests.integration._cli import RESUMABLE, tuner_run, wait_while_running

pytestmark = pytest.mark.integration

BUCKET = "tune-bucket"
# No num_to_keep: Tune deletes an old checkpoint as soon as a newer one registers, while
# the experiment state naming it uploads in the background, so a hard kill can leave the
# bucket's state pointing at a deleted checkpoint (that trial then errors on resume).
SPEC = {
    **RESUMABLE,
    "name": "s3sweep",
    "stop": {"training_iteration": 12},
    "checkpoint": {"frequency": 1, "at_end": True},
}


@pytest.fixture
def s3(monkeypatch):
    from moto.server import ThreadedMotoServer

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    env = {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    import boto3

    client = boto3.client("s3")
    client.create_bucket(Bucket=BUCKET)
    yield client
    server.stop()


def _keys(client, prefix=""):
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
    return [o["Key"] for page in pages for o in page.get("Contents", [])]


def test_sweep_on_s3_is_killed_and_resumed_from_the_bucket(s3, tmp_path):
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(yaml.safe_dump(SPEC))
    data = tmp_path / "data"
    # Tune saves (and uploads) its experiment state every second here, not every 10 s:
    # a kill just after both trials' third checkpoint then finds a state naming the second
    storage = {"TUNER_STORAGE_PATH": f"s3://{BUCKET}/runs", "TUNE_GLOBAL_CHECKPOINT_S": "1"}
    first = tuner_run(spec_path, data, **storage)

    def in_the_bucket():
        keys = _keys(s3, "runs/")
        trials = {k.split("/")[2] for k in keys if "/checkpoint_000002/" in k}
        return len(trials) == 2 and any("/experiment_state-" in k for k in keys)

    try:
        wait_while_running(first, in_the_bucket, "it could be killed")
        time.sleep(3)  # a state upload or two after the checkpoints it must name
    finally:
        os.killpg(first.pid, signal.SIGKILL)  # the process group this test started
        first.wait()
    assert not (data / "ray_results").exists()  # nothing went to local disk

    second = tuner_run(spec_path, data, "--resume", **storage)
    out, _ = second.communicate(timeout=300)
    assert second.returncode == 0, out
    summary = json.loads(out)
    assert summary["path"].startswith(f"s3://{BUCKET}/runs/s3sweep_")
    run_prefix = summary["path"].removeprefix(f"s3://{BUCKET}/") + "/"
    assert len(summary["trials"]) == 2
    for trial in summary["trials"]:
        assert trial["status"] == "TERMINATED", trial
        assert trial["iterations"] == 12, trial
        assert trial["checkpoint"].startswith(summary["path"] + "/")
    results = [k for k in _keys(s3, run_prefix) if k.endswith("/result.json")]
    assert len(results) == 2
    for key in results:
        body = s3.get_object(Bucket=BUCKET, Key=key)["Body"].read().decode()
        last = json.loads(body.strip().splitlines()[-1])
        assert last["training_iteration"] == 12
        assert last["iterations_since_restore"] < 12  # continued from the bucket's checkpoint
    mlflow = MlflowClient(tracking_uri=f"sqlite:///{data / 'mlflow.db'}")
    best_run = summary["mlflow"]["best_run_id"]
    assert [a.path for a in mlflow.list_artifacts(best_run, "checkpoints")]

    # DELETE ?purge=true's Tune part on an object store: the run's keys go, nothing else
    from tuner.purge import purge_tune_dir

    s3.put_object(Bucket=BUCKET, Key="runs/other/keep.txt", Body=b"x")
    assert purge_tune_dir(summary["path"], f"s3://{BUCKET}/runs")
    assert _keys(s3, run_prefix) == []
    assert _keys(s3, "runs/other/") == ["runs/other/keep.txt"]


def test_a_confirmation_with_evaluation_scores_checkpoints_in_the_bucket(s3, tmp_path):
    """Tune names a checkpoint in the bucket without its scheme: the confirmation's final
    evaluation gets it back, downloads the checkpoint and scores it (it used to fail)."""
    from tuner.rllib import evaluate_checkpoint

    spec = {
        **RESUMABLE,
        "name": "s3confirm",
        "search": {"method": "grid", "space": {"lr": {"grid": [1e-3]}}},
        "stop": {"training_iteration": 1},
        "checkpoint": {"at_end": False},
        "evaluation": {"interval": 1, "duration": 2},
        "confirm": {"top_k": 1, "seeds": 2},
    }
    spec["config"] = {**spec["config"], "min_time_s_per_iteration": 0}
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(yaml.safe_dump(spec))
    run_ = tuner_run(spec_path, tmp_path / "data", TUNER_STORAGE_PATH=f"s3://{BUCKET}/runs")
    out, _ = run_.communicate(timeout=300)
    assert run_.returncode == 0, out
    summary = json.loads(out)
    (confirmed,) = summary["confirmation"]
    by_id = {t["trial_id"]: t for t in summary["trials"]}
    runs = [by_id[t] for t in confirmed["trials"]]
    assert all(r["checkpoint"].startswith(f"s3://{BUCKET}/runs/s3confirm_") for r in runs)
    assert confirmed["scores"] == [
        evaluate_checkpoint(r["checkpoint"], episodes=2, seed=r["seed"]).mean_return for r in runs
    ]
    assert not [w for w in summary["warnings"] if "has no score" in w]
