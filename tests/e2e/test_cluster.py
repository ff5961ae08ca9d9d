"""Cluster mode: a two-node Ray cluster started by hand, the service pointed at it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.e2e.conftest import Server, free_port, tiny, wait_for

pytestmark = pytest.mark.e2e
RAY = str(Path(sys.executable).with_name("ray"))


class RayNode:
    """`ray start --block` in its own process group: stopping it stops that node only."""

    def __init__(self, args: list[str], log: Path) -> None:
        env = {**os.environ, "RAY_AUTH_MODE": "token"}
        self.proc = subprocess.Popen(
            [RAY, "start", "--block", "--disable-usage-stats", *args],
            stdout=log.open("ab"),
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )

    def stop(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        except ProcessLookupError:
            pass


def _wait_for_dashboard(address: str, tmp: Path) -> None:
    deadline = time.time() + 90
    while True:
        try:
            if httpx.get(f"{address}/api/version", timeout=2).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        assert time.time() < deadline, (tmp / "head.log").read_text()[-2000:]
        time.sleep(0.5)


def _wait_for_two_nodes(address: str, tmp: Path) -> dict:
    from tuner.launcher import ClusterNodes

    # the dashboard's public state API (what the service reads), not ray.init: this test
    # process may hold another Ray
    state = ClusterNodes(address, 10)
    deadline = time.time() + 90
    while True:
        try:
            alive = state.read()
        except httpx.HTTPError:  # the state API still starting
            alive = []
        if len(alive) == 2:
            return {n["node_id"]: n["resources"] for n in alive}
        assert time.time() < deadline, (tmp / "worker.log").read_text()[-2000:]
        time.sleep(0.5)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cluster")
    port, dash = free_port(), free_port()
    head = RayNode(
        [
            "--head",
            f"--port={port}",
            "--num-cpus=1",
            "--include-dashboard=true",
            "--dashboard-host=127.0.0.1",
            f"--dashboard-port={dash}",
            # the job agent's default port (52365) may be held by any other Ray here
            f"--dashboard-agent-listen-port={free_port()}",
            '--resources={"head_node": 1}',
        ],
        tmp / "head.log",
    )
    address = f"http://127.0.0.1:{dash}"
    worker = None
    try:  # both nodes are stopped whatever happens, a failed start-up included
        _wait_for_dashboard(address, tmp)
        worker = RayNode(
            [
                f"--address=127.0.0.1:{port}",
                "--num-cpus=1",
                f"--dashboard-agent-listen-port={free_port()}",
                '--resources={"worker_node": 1}',
            ],
            tmp / "worker.log",
        )
        nodes = _wait_for_two_nodes(address, tmp)
        yield {"address": address, "nodes": nodes, "tmp": tmp}
    finally:
        if worker is not None:
            worker.stop()
        head.stop()


def test_sweep_spreads_over_both_nodes_as_a_ray_job_and_survives_api_restart(cluster):
    from ray.job_submission import JobSubmissionClient

    data = cluster["tmp"] / "data"
    spec = tiny("cluster", iterations=4)
    spec["config"]["min_time_s_per_iteration"] = 2
    spec["resources"] = {"placement_strategy": "SPREAD"}
    # each trial in its own actor on its own placement group: with actor reuse (the
    # default) the trial whose actor starts first may run the other trial too once it
    # ends, on its node, while the other node's actor is still importing (a loaded host)
    spec["reuse_actors"] = False
    spec["checkpoint"] = {"frequency": 1}
    first = Server(data, TUNER_RAY_ADDRESS=cluster["address"]).start()
    try:
        with first.client() as c:
            assert c.get("/healthz").json()["ray_address"] == cluster["address"]
            listed = c.get("/cluster").json()
            assert {n["node_id"] for n in listed["nodes"]} == set(cluster["nodes"])
            assert listed["cpus"] == 2
            assert [n["is_head"] for n in listed["nodes"]] == [True, False]
            assert "head_node" in listed["nodes"][0]["resources"]
            assert "worker_node" in listed["nodes"][1]["resources"]
            # the API knows the cluster's nodes: two 1-CPU nodes hold a 2-bundle trial
            # spread, never packed strictly onto one node
            strict = {
                **spec,
                "resources": {"num_env_runners": 1, "placement_strategy": "STRICT_PACK"},
            }
            r = c.post("/experiments", json=strict)
            assert r.status_code == 422, r.text
            assert r.json()["detail"][0]["loc"].startswith("resources")
            assert "STRICT_PACK" in r.json()["detail"][0]["msg"]
            exp_id = c.post("/experiments", json=spec).json()["id"]
            view = wait_for(c, exp_id, lambda v: v["status"] != "QUEUED" and v["job_id"])
            assert view["status"] == "RUNNING", view["error"]
            # the job id is stored just before the submission: wait for the job itself
            jobs = JobSubmissionClient(cluster["address"])
            deadline = time.time() + 60
            while view["job_id"] not in {j.submission_id for j in jobs.list_jobs()}:
                assert time.time() < deadline, "the sweep never became a Ray Job"
                time.sleep(0.5)
    finally:
        first.stop()  # a clean shutdown must leave a cluster it did not start alone
    job = jobs.get_job_info(view["job_id"])
    assert job.entrypoint.endswith(f"-m tuner.sweep {exp_id}")
    assert job.status.value in {"PENDING", "RUNNING", "SUCCEEDED"}
    second = Server(data, TUNER_RAY_ADDRESS=cluster["address"]).start()
    try:
        with second.client() as c:
            view = wait_for(c, exp_id, lambda v: v["status"] in {"SUCCEEDED", "FAILED"})
            assert view["status"] == "SUCCEEDED", view["error"]
            assert view["attempts"] == 1
            trials = c.get(f"/experiments/{exp_id}/trials").json()["items"]
    finally:
        second.stop()
    deadline = time.time() + 60  # the driver writes its outcome just before it exits
    while jobs.get_job_status(view["job_id"]).value == "RUNNING" and time.time() < deadline:
        time.sleep(0.5)
    assert jobs.get_job_status(view["job_id"]).value == "SUCCEEDED"
    assert len(trials) == 2
    assert all(t["iterations"] == 4 for t in trials)
    used = {t["node_id"] for t in trials}
    # one trial on each node (a trial retried after a failure says so: its error)
    tried = [(t["trial_id"], t["node_id"], t["retries"], t["error"]) for t in trials]
    assert used == set(cluster["nodes"]), tried
    kinds = {
        next(k for k in ("head_node", "worker_node") if k in cluster["nodes"][n]) for n in used
    }
    assert kinds == {"head_node", "worker_node"}


def test_another_ray_started_later_on_the_host_does_not_capture_our_sweeps(server, tmp_path):
    """Ray hands a job's driver the host's newest cluster (`/tmp/ray/ray_current_cluster`)
    as its address. The embedded head keeps its own temp dir, so a Ray someone starts
    later on the same machine neither receives our sweeps nor sees our head."""
    port = free_port()
    other = RayNode(
        ["--head", f"--port={port}", "--num-cpus=1", "--include-dashboard=false"],
        tmp_path / "other-head.log",
    )
    try:
        current = Path("/tmp/ray/ray_current_cluster")
        deadline = time.time() + 90
        while not (current.exists() and current.read_text().strip().endswith(f":{port}")):
            assert time.time() < deadline, (tmp_path / "other-head.log").read_text()[-2000:]
            time.sleep(0.5)
        with server.client() as c:
            own = {n["node_id"] for n in c.get("/cluster").json()["nodes"]}
            spec = tiny("own-head", iterations=1)
            spec["search"] = {"method": "grid", "space": {"lr": {"grid": [1e-3]}}}
            exp_id = c.post("/experiments", json=spec).json()["id"]
            view = wait_for(c, exp_id, lambda v: v["status"] in {"SUCCEEDED", "FAILED"}, 180)
            assert view["status"] == "SUCCEEDED", view["error"]
            (trial,) = c.get(f"/experiments/{exp_id}/trials").json()["items"]
        assert trial["node_id"] in own  # ran on the service's own head
    finally:
        other.stop()
