"""Secrets stay out: the store's URL and the API token appear in no job runtime_env, job
log, MLflow param or tag, or API response, and the sweep still runs (its driver gets the
store's URL from the Ray head's own environment)."""

from __future__ import annotations

import json

import pytest
from mlflow.tracking import MlflowClient

from tests.e2e.conftest import Server, tiny, wait_for
from tuner.launcher import RayJobs

pytestmark = pytest.mark.e2e

TOKEN = "tok-5ecret-7c1e"


def test_secrets_stay_out_of_jobs_mlflow_and_responses(tmp_path):
    data = tmp_path / "data"
    store = tmp_path / "private-store-s3cr3t.db"
    db_url = f"sqlite:///{store}"
    server = Server(data, TUNER_DATABASE_URL=db_url, TUNER_API_TOKEN=TOKEN).start()
    seen: list[str] = []
    try:
        auth = {"Authorization": f"Bearer {TOKEN}"}
        with server.client(headers=auth) as c:
            spec = tiny(
                "secrets",
                iterations=1,
                search={"method": "grid", "space": {"lr": {"grid": [1e-3]}}},
            )
            created = c.post("/experiments", json=spec)
            seen.append(created.text)
            exp_id = created.json()["id"]
            view = wait_for(c, exp_id, lambda v: v["status"] in {"SUCCEEDED", "FAILED"})
            assert view["status"] == "SUCCEEDED", view["error"]  # the driver found the store
            for path in (
                "/healthz",
                "/experiments",
                f"/experiments/{exp_id}",
                f"/experiments/{exp_id}/trials",
                "/algorithms",
                "/cluster",
            ):
                seen.append(c.get(path).text)
            address = c.get("/healthz").json()["ray_address"]
        assert store.exists()
        jobs = RayJobs(address, timeout_s=30)
        job = jobs.info(view["job_id"])
        seen += [json.dumps(job), jobs.logs(view["job_id"])]
        client = MlflowClient(tracking_uri=f"sqlite:///{data / 'mlflow.db'}")
        for run in client.search_runs([view["mlflow"]["experiment_id"]]):
            seen += [json.dumps(run.data.params), json.dumps(run.data.tags)]
        assert job["runtime_env"]["env_vars"]["TUNER_DATA_DIR"] == str(data)
    finally:
        server.stop()
        server.stop_head()
    text = "\n".join(seen)
    assert len(seen) > 10
    assert exp_id in text
    for secret in (TOKEN, "private-store-s3cr3t", db_url):
        assert secret not in text, secret
