"""Kill the API server mid-sweep, and kill a sweep's driver: nothing lost, nothing twice."""

from __future__ import annotations

import os
import signal
import threading
import time

import httpx
import pytest
from mlflow.tracking import MlflowClient

from tests.e2e.conftest import Server, tiny, wait_for
from tuner.statuses import TERMINAL

pytestmark = pytest.mark.e2e


def slow_spec(name, iterations=6):
    spec = tiny(name, iterations=iterations)
    spec["config"]["min_time_s_per_iteration"] = 1
    spec["checkpoint"] = {"frequency": 1, "at_end": True, "num_to_keep": 2}
    return spec


def running_with_progress(client, exp_id):
    def check(view):
        items = client.get(f"/experiments/{exp_id}/trials").json()["items"]
        return view["status"] == "RUNNING" and any(t["iterations"] >= 1 for t in items)

    return check


def assert_each_trial_once(server, view, trials, iterations):
    assert len(trials) == 2
    assert len({t["trial_id"] for t in trials}) == 2
    assert all(t["status"] == "TERMINATED" and t["iterations"] == iterations for t in trials)
    mlflow = MlflowClient(tracking_uri=f"sqlite:///{server.data_dir / 'mlflow.db'}")
    runs = mlflow.search_runs([view["mlflow"]["experiment_id"]])
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = [
        r for r in runs if r.data.tags.get("mlflow.parentRunId") == view["mlflow"]["parent_run_id"]
    ]
    assert len([p for p in parents if p.info.run_id == view["mlflow"]["parent_run_id"]]) == 1
    assert sorted(r.data.tags["tuner.trial_id"] for r in children) == sorted(
        t["trial_id"] for t in trials
    )


def test_server_killed_mid_sweep_and_restarted(tmp_path):
    data = tmp_path / "data"
    first = Server(data).start()
    try:
        with first.client() as c:
            exp_id = c.post("/experiments", json=slow_spec("durable")).json()["id"]
            wait_for(c, exp_id, running_with_progress(c, exp_id))
        first.kill()  # SIGKILL: no shutdown, the Ray head and the sweep's job live on
        second = Server(data).start()
        try:
            with second.client() as c:
                view = wait_for(c, exp_id, lambda v: v["status"] in TERMINAL)
                assert view["status"] == "SUCCEEDED", view["error"]
                assert view["attempts"] == 1  # followed again, not relaunched
                trials = c.get(f"/experiments/{exp_id}/trials").json()["items"]
                assert_each_trial_once(second, view, trials, 6)
        finally:
            second.stop()
    finally:
        first.stop_head()


def test_dead_driver_is_resumed_automatically(tmp_path):
    server = Server(tmp_path / "data").start()
    try:
        with server.client() as c:
            exp_id = c.post("/experiments", json=slow_spec("driver-dies")).json()["id"]
            wait_for(c, exp_id, running_with_progress(c, exp_id))
            from ray.job_submission import JobSubmissionClient

            job_id = c.get(f"/experiments/{exp_id}").json()["job_id"]
            jobs = JobSubmissionClient(c.get("/healthz").json()["ray_address"])
            pid = jobs.get_job_info(job_id).driver_info.pid
            os.kill(int(pid), signal.SIGKILL)  # the sweep's driver process, by its id
            view = wait_for(
                c, exp_id, lambda v: v["status"] in TERMINAL and v["attempts"] > 1, timeout=300
            )
            assert view["status"] == "SUCCEEDED", view["error"]
            assert view["attempts"] == 2
            trials = c.get(f"/experiments/{exp_id}/trials").json()["items"]
            assert_each_trial_once(server, view, trials, 6)
    finally:
        server.stop()
        server.stop_head()


def test_queue_runs_sweeps_in_submission_order_up_to_the_limit(tmp_path):
    server = Server(tmp_path / "data", TUNER_MAX_RUNNING_EXPERIMENTS="1").start()
    try:
        with server.client() as c:
            first = c.post("/experiments", json=tiny("first")).json()["id"]
            second = c.post("/experiments", json=tiny("second")).json()["id"]
            view = wait_for(c, first, lambda v: v["status"] == "RUNNING")
            assert c.get(f"/experiments/{second}").json()["status"] == "QUEUED"
            done = wait_for(c, second, lambda v: v["status"] in TERMINAL, timeout=300)
            view = c.get(f"/experiments/{first}").json()
            assert view["status"] == done["status"] == "SUCCEEDED"
            assert done["started_at"] >= view["finished_at"]  # never two at once
    finally:
        server.stop()
        server.stop_head()


def test_serve_with_mlflow_ui_starts_and_stops_it(tmp_path):
    import httpx

    from tests.e2e.conftest import free_port

    ui_port = free_port()
    # the server waits up to 300 s for the UI (a slow start on busy cores)
    server = Server(tmp_path / "data", "--mlflow-ui", "--mlflow-port", str(ui_port)).start(
        timeout=420
    )
    ui = f"http://127.0.0.1:{ui_port}"
    try:
        # once the API answers (make run has printed its URLs), the UI answers too
        assert httpx.get(f"{ui}/health", timeout=10).status_code == 200
    finally:
        server.stop()  # SIGTERM, as make run's Ctrl-C
        server.stop_head()
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"{ui}/health", timeout=2)  # stopped with the server


def test_server_killed_during_a_post_and_during_a_stop(tmp_path):
    """SIGKILL the API server while a POST is in flight, and again right after a stop was
    accepted: after each restart there is no duplicate sweep, and nothing is left stuck in
    STOPPING (the restarted supervisor finishes the stop; a resume then finishes the
    sweep)."""
    data = tmp_path / "data"
    first = Server(data).start()
    try:
        answers: list[object] = []

        def post() -> None:
            try:
                with first.client() as c:
                    answers.append(c.post("/experiments", json=slow_spec("in-flight")).status_code)
            except httpx.HTTPError as err:  # the server died under it
                answers.append(err)

        sender = threading.Thread(target=post)
        sender.start()
        time.sleep(0.3)  # the request is on its way (validation takes longer than this)
        first.kill()
        sender.join(timeout=60)
        second = Server(data).start()
        try:
            with second.client() as c:
                same = [
                    e for e in c.get("/experiments").json()["items"] if e["name"] == "in-flight"
                ]
                assert len(same) <= 1, same  # stored once or not at all, never twice
                if not same:  # the client got no 201: sending it again is safe
                    same = [c.post("/experiments", json=slow_spec("in-flight")).json()]
                exp_id = same[0]["id"]
                wait_for(c, exp_id, running_with_progress(c, exp_id))
                assert c.post(f"/experiments/{exp_id}/stop").json()["status"] == "STOPPING"
            second.kill()  # the stop is accepted; the server dies before it is done
            third = Server(data).start()
            try:
                with third.client() as c:
                    view = wait_for(c, exp_id, lambda v: v["status"] in TERMINAL, timeout=180)
                    assert view["status"] == "STOPPED", view  # never stuck in STOPPING
                    assert c.post(f"/experiments/{exp_id}/resume").json()["status"] == "QUEUED"
                    view = wait_for(c, exp_id, lambda v: v["status"] in TERMINAL, timeout=300)
                    assert view["status"] == "SUCCEEDED", view["error"]
                    trials = c.get(f"/experiments/{exp_id}/trials").json()["items"]
                    assert_each_trial_once(third, view, trials, 6)
                    names = [e["name"] for e in c.get("/experiments").json()["items"]]
                    assert names.count("in-flight") == 1
            finally:
                third.stop()
        finally:
            second.stop()
    finally:
        first.stop_head()


def test_the_embedded_head_killed_mid_sweep_is_started_again_and_the_sweep_resumes(tmp_path):
    """SIGKILL the embedded Ray head (its whole process group: GCS, raylet, the sweep's
    driver) while a sweep runs: the service starts a new head, finds the sweep's job gone
    and resumes the sweep from Tune's saved state; it finishes with each trial once."""
    import json

    data = tmp_path / "data"
    server = Server(data).start()
    try:
        with server.client() as c:
            exp_id = c.post("/experiments", json=slow_spec("head-dies")).json()["id"]
            wait_for(c, exp_id, running_with_progress(c, exp_id))
            old = json.loads((data / "ray-head.json").read_text())
            os.killpg(int(old["pid"]), signal.SIGKILL)  # the head this server started
            view = wait_for(c, exp_id, lambda v: v["status"] in TERMINAL, timeout=400)
            assert view["status"] == "SUCCEEDED", view["error"]
            assert view["attempts"] == 2
            # what ended the first attempt is history now: a warning, not the sweep's error
            assert view["error"] is None
            assert any("earlier attempt" in w for w in view["warnings"]), view["warnings"]
            new = json.loads((data / "ray-head.json").read_text())
            assert new["pid"] != old["pid"]
            assert c.get("/healthz").json()["ray_address"] == new["address"]
            trials = c.get(f"/experiments/{exp_id}/trials").json()["items"]
            assert_each_trial_once(server, view, trials, 6)
    finally:
        server.stop()
        server.stop_head()
