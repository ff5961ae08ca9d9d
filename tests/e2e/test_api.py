"""The real server over HTTP: submit, follow, inspect, stop, resume, errors."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from mlflow.tracking import MlflowClient

from tests.e2e.conftest import tiny, wait_for
from tuner.launcher import RayJobs
from tuner.mlflow_names import TAG_WARM_RUN
from tuner.rllib._machine import cpu_description
from tuner.statuses import TERMINAL

pytestmark = pytest.mark.e2e


def test_health_and_openapi(server):
    with server.client() as c:
        health = c.get("/healthz").json()
        assert health["status"] == "ok"
        assert health["ray_address"].startswith("http://127.0.0.1")
        schema = c.get(f"{server.url}/openapi.json").json()
        assert "ExperimentSpec" in schema["components"]["schemas"]
        assert "/api/v1/experiments/{experiment_id}/trials" in schema["paths"]
        algos = {a["name"]: a for a in c.get("/algorithms").json()}
        assert algos["Rainbow_DQN"]["base_algorithm"] == "DQN"
        assert algos["Noisy_DQN"]["warnings"]
        assert "lr" in algos["PPO"]["default_space"]


def test_cluster_view_lists_the_embedded_head(server):
    deadline = time.time() + 30  # a fresh head registers its node a moment after start
    with server.client() as c:
        while not (view := c.get("/cluster").json())["nodes"] and time.time() < deadline:
            time.sleep(0.5)
    assert view["reachable"]
    assert view["ray_address"].startswith("http://127.0.0.1:")
    (node,) = view["nodes"]
    assert node["is_head"]
    assert node["node_id"]
    assert node["node_ip"]
    assert node["cpus"] == view["cpus"] == 2  # TUNER_EMBEDDED_NUM_CPUS
    assert node["gpus"] == view["gpus"] == node["resources"].get("GPU", 0)
    assert not any(k.startswith("node:") for k in node["resources"])


def test_sweep_end_to_end(server):
    with server.client() as c:
        spec = {**tiny("e2e-sweep"), "confirm": {"top_k": 1, "seeds": 2}}
        created = c.post("/experiments", json=spec)
        assert created.status_code == 201, created.text
        exp_id = created.json()["id"]
        assert created.json()["status"] in {"QUEUED", "RUNNING"}
        view = wait_for(c, exp_id, lambda v: v["status"] in TERMINAL)
        assert view["status"] == "SUCCEEDED", view["error"]
        assert view["trial_counts"] == {"TERMINATED": 4}  # 2 searched, 2 confirming
        every = c.get(f"/experiments/{exp_id}/trials").json()["items"]
        trials = [t for t in every if t["stage"] == "search"]
        confirming = [t for t in every if t["stage"] == "confirm"]
        (confirmed,) = view["confirmation"]  # the driver's confirmation, through REST
        assert confirmed["trial_id"] in {t["trial_id"] for t in trials}
        assert sorted(t["seed"] for t in confirming) == confirmed["seeds"] == [2, 3]
        assert confirmed["scores"] == [
            next(t["score"] for t in confirming if t["seed"] == s) for s in confirmed["seeds"]
        ]
        assert view["best"]["confirmed"] == confirmed
        assert sorted(t["config"]["lr"] for t in trials) == [1e-4, 1e-3]
        nodes = c.get("/cluster").json()["nodes"]
        for t in trials:
            assert t["node_id"] in {n["node_id"] for n in nodes}  # ran on a node listed there
            # 2 batches of 128 on 4 vectorised envs: a sub-env that resets in a vector step
            # samples nothing, so a round may take up to 3 steps more
            assert t["iterations"] == 2
            assert 256 <= t["env_steps"] <= 256 + 2 * 3
            assert t["mlflow_run_id"]
            assert t["node_ip"]
            assert t["device"] == "cpu"
            assert t["cpu"] == cpu_description()  # the CPU and kernels it trained on
            assert t["seed"] in (0, 1)
            points = c.get(f"/experiments/{exp_id}/trials/{t['trial_id']}/metrics").json()
            assert [p["iteration"] for p in points["points"]] == [1, 2]
            assert f"/runs/{t['mlflow_run_id']}?workflowType=" in t["mlflow_url"]
        assert all(t["stage"] == "search" and t["score"] is not None for t in trials)
        best = max(trials, key=lambda t: t["score"])  # ranked under the spec's scope
        assert view["best"]["trial_id"] == best["trial_id"]
        assert view["best"]["config"] == best["config"]
        assert view["best"]["checkpoint"]
        assert view["best"]["metric_value"] == best["score"]
        series = c.get(f"/experiments/{exp_id}/metrics").json()["series"]
        assert {k: len(v) for k, v in series.items()} == {t["trial_id"]: 2 for t in every}
        mlflow = MlflowClient(tracking_uri=f"sqlite:///{server.data_dir / 'mlflow.db'}")
        parent = mlflow.get_run(view["mlflow"]["parent_run_id"])
        assert parent.data.params["best.trial_id"] == best["trial_id"]
        children = mlflow.search_runs(
            [view["mlflow"]["experiment_id"]],
            filter_string=f"tags.mlflow.parentRunId = '{parent.info.run_id}'",
        )
        assert {r.info.run_id for r in children} == {t["mlflow_run_id"] for t in every}
        listed = c.get("/experiments", params={"status": "SUCCEEDED"}).json()
        assert exp_id in [e["id"] for e in listed["items"]]
        assert listed["total"] >= 1
        assert c.delete(f"/experiments/{exp_id}").status_code == 204
        assert c.get(f"/experiments/{exp_id}").status_code == 404
        # without ?purge the sweep's files and MLflow runs stay
        assert (server.data_dir / "ray_results" / exp_id).is_dir()
        assert mlflow.get_run(parent.info.run_id).info.lifecycle_stage == "active"


def test_delete_with_purge_removes_tune_files_and_mlflow_runs(server):
    spec = tiny(
        "e2e-purge", iterations=1, search={"method": "grid", "space": {"lr": {"grid": [1e-3]}}}
    )
    with server.client() as c:
        exp_id = c.post("/experiments", json=spec).json()["id"]
        view = wait_for(c, exp_id, lambda v: v["status"] in TERMINAL)
        assert view["status"] == "SUCCEEDED", view["error"]
        run_dir = server.data_dir / "ray_results" / exp_id
        assert list(run_dir.glob("TunerPPO_*/checkpoint_*"))
        mlflow = MlflowClient(tracking_uri=f"sqlite:///{server.data_dir / 'mlflow.db'}")
        parent = view["mlflow"]["parent_run_id"]
        (trial,) = c.get(f"/experiments/{exp_id}/trials").json()["items"]
        model = view["mlflow"]["model_version"].removeprefix("models:/").rsplit("/", 1)[0]
        assert mlflow.search_model_versions(f"name = '{model}'")

        assert c.delete(f"/experiments/{exp_id}", params={"purge": "yes please"}).status_code == 422
        assert c.get(f"/experiments/{exp_id}").status_code == 200  # nothing lost by a bad call
        cli = [sys.executable, "-m", "tuner.cli"]
        out = subprocess.run(
            [*cli, "delete", exp_id, "--purge", "--url", server.url], capture_output=True, text=True
        )
        assert out.returncode == 0, out.stderr
        assert "purged" in out.stdout, out.stderr
        assert c.get(f"/experiments/{exp_id}").status_code == 404
        again = subprocess.run([*cli, "delete", exp_id, "--url", server.url], capture_output=True)
        assert again.returncode == 2  # 404, reported, not a traceback
        assert not run_dir.exists()
        for run_id in (parent, trial["mlflow_run_id"]):
            assert mlflow.get_run(run_id).info.lifecycle_stage == "deleted"
        assert not [
            v
            for v in mlflow.search_model_versions(f"name = '{model}'")
            if v.run_id == trial["mlflow_run_id"]
        ]


def test_stop_then_resume_into_the_same_mlflow_run(server):
    """A stop makes each running trial checkpoint first, even with `checkpoint.frequency`
    0, so the resumed trials continue where they were instead of starting over."""
    spec = tiny("e2e-stop", iterations=8)
    spec["config"]["min_time_s_per_iteration"] = 1
    spec["checkpoint"] = {"frequency": 0, "at_end": True}
    with server.client() as c:
        exp_id = c.post("/experiments", json=spec).json()["id"]

        def progressed(view):
            items = c.get(f"/experiments/{exp_id}/trials").json()["items"]
            return (
                view["status"] == "RUNNING"
                and len(items) == 2
                and all(t["iterations"] >= 2 for t in items)
            )

        wait_for(c, exp_id, progressed)
        stopped = c.post(f"/experiments/{exp_id}/stop")
        assert stopped.status_code == 202
        assert stopped.json()["status"] == "STOPPING"
        assert c.delete(f"/experiments/{exp_id}").status_code == 409
        view = wait_for(c, exp_id, lambda v: v["status"] in TERMINAL, timeout=120)
        assert view["status"] == "STOPPED"
        trials = c.get(f"/experiments/{exp_id}/trials").json()["items"]
        assert len(trials) == 2, trials
        assert all(2 <= t["iterations"] < 8 for t in trials), trials
        assert all(t["status"] == "PAUSED" for t in trials), trials
        at_stop = {t["trial_id"]: t["iterations"] for t in trials}
        parent = view["mlflow"]["parent_run_id"]
        assert c.post(f"/experiments/{exp_id}/stop").status_code == 409
        assert c.post(f"/experiments/{exp_id}/resume").status_code == 202
        view = wait_for(c, exp_id, lambda v: v["status"] in TERMINAL)
        assert view["status"] == "SUCCEEDED", view["error"]
        assert view["mlflow"]["parent_run_id"] == parent
        trials = c.get(f"/experiments/{exp_id}/trials").json()["items"]
        assert len(trials) == 2
        assert all(t["iterations"] == 8 for t in trials)
    # Tune's own record: after the resume each trial trained only the iterations it had
    # left (restored from the stop's checkpoint, not from iteration 0)
    results = list((server.data_dir / "ray_results" / exp_id).glob("*/result.json"))
    assert len(results) == 2
    for path in results:
        last = json.loads(path.read_text().strip().splitlines()[-1])
        assert last["training_iteration"] == 8
        resumed_from = 8 - last["iterations_since_restore"]
        assert resumed_from >= at_stop[last["trial_id"]] - 1, (resumed_from, at_stop)
        assert resumed_from >= 2


def test_stop_and_resume_during_the_confirmation_rerun_no_search_trial(server):
    """A stop while the confirmation runs, then a resume: the search is not run again
    (its trials, iterations and Tune histories are as they were) and the confirmation
    completes, each trial once."""
    spec = {**tiny("e2e-confirm-stop"), "confirm": {"top_k": 1, "seeds": 2}}
    # iterations of 3 s: the stop lands while a confirmation trial still trains, even on a
    # loaded machine (with 1 s, both confirmation trials could end before it)
    spec["config"]["min_time_s_per_iteration"] = 3
    runs = server.data_dir / "ray_results"
    with server.client() as c:
        exp_id = c.post("/experiments", json=spec).json()["id"]

        def trials():
            return c.get(f"/experiments/{exp_id}/trials").json()["items"]

        def searched():  # what a search trial run again would change
            keys = ("iterations", "env_steps", "seed", "config", "score", "mlflow_run_id")
            return {
                t["trial_id"]: {k: t[k] for k in keys} for t in trials() if t["stage"] == "search"
            }

        def confirming(view):
            assert view["status"] not in TERMINAL, view  # the stop must come first
            return any(t["stage"] == "confirm" for t in trials())

        wait_for(c, exp_id, confirming, interval=0.25)
        assert c.post(f"/experiments/{exp_id}/stop").status_code == 202
        view = wait_for(c, exp_id, lambda v: v["status"] in TERMINAL, timeout=120)
        assert view["status"] == "STOPPED", view["error"]
        search = searched()
        assert len(search) == 2
        assert all(t["iterations"] == 2 for t in search.values())
        cut = [t for t in trials() if t["stage"] == "confirm"]  # the stop cut it short
        assert any(t["status"] != "TERMINATED" for t in cut) or len(cut) < 2, cut
        histories = {p: p.read_text() for p in (runs / exp_id).glob("*/result.json")}
        assert len(histories) == 2

        assert c.post(f"/experiments/{exp_id}/resume").status_code == 202
        view = wait_for(c, exp_id, lambda v: v["status"] in TERMINAL)
        assert view["status"] == "SUCCEEDED", view["error"]
        every = trials()
        assert searched() == search
    assert {p: p.read_text() for p in (runs / exp_id).glob("*/result.json")} == histories
    assert len({t["trial_id"] for t in every}) == len(every) == 4  # each trial once
    confirming = [t for t in every if t["stage"] == "confirm"]
    assert all(t["status"] == "TERMINATED" and t["iterations"] == 2 for t in confirming)
    (confirmed,) = view["confirmation"]
    assert confirmed["trial_id"] in search
    assert len(confirmed["seeds"]) == 2
    assert sorted(t["seed"] for t in confirming) == confirmed["seeds"]
    assert None not in confirmed["scores"]
    assert confirmed["mean"] is not None
    assert view["best"]["confirmed"] == confirmed
    # the confirmation's Tune run finished both seeds, each from one trial directory
    assert len(list((runs / f"{exp_id}-confirm").glob("*/result.json"))) == 2
    mlflow = MlflowClient(tracking_uri=f"sqlite:///{server.data_dir / 'mlflow.db'}")
    children = mlflow.search_runs(
        [view["mlflow"]["experiment_id"]],
        filter_string=f"tags.mlflow.parentRunId = '{view['mlflow']['parent_run_id']}'",
    )
    assert sorted(r.info.run_id for r in children) == sorted(t["mlflow_run_id"] for t in every)


@pytest.mark.parametrize(
    "patch, loc, value",
    [
        ({"algorithm": "A2C"}, "algorithm", "A2C"),
        ({"env": "NoSuchEnv-v3"}, "env", "NoSuchEnv-v3"),
        ({"config": {"lr_typo": 1}}, "config.lr_typo", 1),
        ({"search": {"method": "random", "space": {"lr": {"grid": [1, 2]}}}}, "search", None),
        ({"name": "../../etc/passwd"}, "name", "../../etc/passwd"),
        ({"env": "os:system"}, "env", "os:system"),
        # the embedded head has 2 CPUs: 1 learner + 4 env runners can never be placed
        ({"resources": {"num_env_runners": 4}}, "resources", None),
    ],
)
def test_bad_specs_are_422_naming_field_and_value(server, patch, loc, value):
    with server.client() as c:
        before = c.get("/experiments").json()["total"]
        r = c.post("/experiments", json={**tiny("bad"), **patch})
        assert r.status_code == 422, r.text
        issues = r.json()["detail"]
        assert any(i["loc"] == loc or i["loc"].startswith(loc + ".") for i in issues), issues
        if value is not None:
            assert any(i["value"] == value for i in issues), issues
        assert c.get("/experiments").json()["total"] == before  # nothing stored


def test_malformed_and_oversized_bodies(server):
    with server.client() as c:
        r = c.post(
            "/experiments", content=b"{not json", headers={"content-type": "application/json"}
        )
        assert r.status_code == 422
        assert "JSON" in r.json()["detail"][0]["msg"]
        r = c.post(
            "/experiments", content=b"name: [x", headers={"content-type": "application/yaml"}
        )
        assert r.status_code == 422
        r = c.post("/experiments", content=b"x" * 2_000_000)
        assert r.status_code == 413
        r = c.post("/experiments", content=b"{}", headers={"content-type": "text/plain"})
        assert r.status_code == 415
        bomb = b"a: &a [x, x]\nb: &b [*a, *a]\nname: n\n"
        r = c.post("/experiments", content=bomb, headers={"content-type": "application/yaml"})
        msg = r.json()["detail"][0]["msg"]
        assert r.status_code == 422, msg
        assert "alias" in msg or "anchor" in msg, msg
        r = c.post("/experiments", content=b"[" * 200_000)
        assert r.status_code == 413
        assert "nested deeper" in r.json()["detail"][0]["msg"]
        huge = {**tiny("huge"), "search": {"space": {"n": {"randint": [0, 10**400]}}}}
        r = c.post(
            "/experiments", content=json.dumps(huge), headers={"content-type": "application/json"}
        )
        assert r.status_code == 422
        assert r.json()["detail"][0]["loc"].startswith("search")
        r = c.post("/experiments", json={**tiny("nan"), "stop": {"episode_return_mean": "NaN"}})
        assert r.status_code == 422
        r = c.post("/experiments", json={**tiny("importpath"), "env": "mlflow.utils.process:x"})
        assert r.status_code == 422
        assert "TUNER_ALLOWED_MODULES" in r.json()["detail"][0]["msg"]
        assert c.get("/experiments", params={"offset": 10**20}).status_code == 422
        assert c.get("/experiments/nope").status_code == 404
        assert c.get("/experiments", params={"status": "DONE"}).status_code == 422
        assert c.get("/experiments", params={"limit": 0}).status_code == 422


def test_trial_bigger_than_the_cluster_is_422_at_submit(server):
    """The API reads the cluster's nodes (Ray state API) and refuses a sweep that would
    sit PENDING forever, with the numbers, before anything is stored."""
    with server.client() as c:
        before = c.get("/experiments").json()["total"]
        spec = tiny("too-big", resources={"num_env_runners": 3, "num_cpus_per_env_runner": 2})
        r = c.post("/experiments", json=spec)
        assert r.status_code == 422, r.text
        issue = r.json()["detail"][0]
        assert issue["loc"] == "resources.num_env_runners"
        assert "CPU: 7" in issue["msg"], issue
        assert "cluster has {CPU: 2}" in issue["msg"], issue
        assert issue["value"]["num_env_runners"] == 3
        assert c.get("/experiments").json()["total"] == before


def test_a_dry_run_plans_and_stores_and_launches_nothing(server):
    with server.client() as c:
        before = c.get("/experiments").json()["total"]
        ray = c.get("/healthz").json()["ray_address"]
        jobs_before = len(RayJobs(ray, 30).list())
        spec = tiny(
            "dry",
            search={"method": "grid", "num_samples": 2, "space": {"lr": {"grid": [1e-4, 1e-3]}}},
            confirm={"top_k": 1, "seeds": 3},
        )
        r = c.post("/experiments", params={"dry_run": "true"}, json=spec)
        assert r.status_code == 200, r.text
        plan = r.json()
        assert (plan["trials"], plan["confirm_trials"], plan["fits"]) == (4, 3, True)
        assert plan["per_trial"]["CPU"] == 1
        assert plan["concurrent"] == 2
        assert plan["limited_by"] in {"CPU", "max_concurrent_trials"}
        big = {**spec, "resources": {"num_env_runners": 8}}
        r = c.post("/experiments", params={"dry_run": "true"}, json=big)
        assert r.status_code == 200
        assert r.json()["fits"] is False
        assert r.json()["problems"][0]["loc"] == "resources.num_env_runners"
        r = c.post("/experiments", params={"dry_run": "true"}, json={**spec, "name": "a b"})
        assert r.status_code == 422
        assert r.json()["detail"][0]["loc"] == "name"
        assert c.get("/experiments").json()["total"] == before  # nothing stored
    time.sleep(2)  # a launch would have happened by now (the supervisor polls every 0.5 s)
    assert len(RayJobs(ray, 30).list()) == jobs_before  # nothing launched


def test_a_warm_start_over_rest_reuses_the_earlier_best_and_compares_with_it(server):
    """Learn from a sweep through the service: a second sweep warm-started from the
    first by its id runs the first's best config first (MLflow names the source), and
    GET /compare puts the two side by side."""
    space = {"lr": {"loguniform": [1e-4, 1e-2]}}
    first = tiny(
        "e2e-cold", iterations=1, search={"method": "random", "num_samples": 2, "space": space}
    )
    with server.client() as c:
        cold_id = c.post("/experiments", json=first).json()["id"]
        cold = wait_for(c, cold_id, lambda v: v["status"] in {"SUCCEEDED", "FAILED"}, timeout=180)
        assert cold["status"] == "SUCCEEDED", cold
        warm_spec = tiny(
            "e2e-warm",
            iterations=1,
            search={
                "method": "optuna",
                "num_samples": 2,
                "space": space,
                "warm_start": {"from": cold_id, "top_k": 1},
            },
        )
        missing = c.post(
            "/experiments",
            json={
                **warm_spec,
                "search": {**warm_spec["search"], "warm_start": {"from": "nowhere"}},
            },
        )
        assert missing.status_code == 422
        assert "search.warm_start.from" in missing.text
        warm_id = c.post("/experiments", json=warm_spec).json()["id"]
        warm = wait_for(c, warm_id, lambda v: v["status"] in {"SUCCEEDED", "FAILED"}, timeout=180)
        assert warm["status"] == "SUCCEEDED", warm
        trials = c.get(f"/experiments/{warm_id}/trials").json()["items"]
        # the earlier best config ran as one of the new sweep's trials (its first)
        assert cold["best"]["config"]["lr"] in [t["config"]["lr"] for t in trials]
        compared = c.get("/compare", params={"ids": f"{cold_id},{warm_id}"})
        assert compared.status_code == 200, compared.text
        sweeps = compared.json()["sweeps"]
    assert [s["id"] for s in sweeps] == [cold_id, warm_id]
    assert [s["best"]["trial_id"] for s in sweeps] == [
        cold["best"]["trial_id"],
        warm["best"]["trial_id"],
    ]
    mlflow = MlflowClient(tracking_uri=f"sqlite:///{server.data_dir / 'mlflow.db'}")
    tags = mlflow.get_run(warm["mlflow"]["parent_run_id"]).data.tags
    assert tags[TAG_WARM_RUN] == cold["mlflow"]["parent_run_id"]
