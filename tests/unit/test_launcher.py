"""The launcher's Ray Jobs client gives up on a dashboard that never answers."""

from __future__ import annotations

import json
import socket
import time
from datetime import timedelta

import httpx
import pytest

from tuner import service
from tuner.launcher import (
    JobNotFound,
    JobsError,
    JobsTimedOut,
    JobsUnavailable,
    Launcher,
    RayJobs,
)
from tuner.settings import Settings
from tuner.store import Store
from tuner.store._models import utcnow


def test_jobs_client_requests_have_a_deadline(tmp_path):
    """A dashboard that accepts connections but never replies makes the call fail within
    TUNER_RAY_REQUEST_TIMEOUT_S instead of stalling the supervisor's thread forever."""
    with socket.socket() as hung:
        hung.bind(("127.0.0.1", 0))
        hung.listen(8)  # accepted by the kernel, never read or answered
        address = f"http://127.0.0.1:{hung.getsockname()[1]}"
        launcher = Launcher(
            Settings(data_dir=tmp_path, ray_address=address, ray_request_timeout_s=1)
        )
        started = time.monotonic()
        with pytest.raises(JobsTimedOut):
            RayJobs(address, timeout_s=1).list()
        assert time.monotonic() - started < 15
        started = time.monotonic()
        assert launcher.cluster_nodes() is None  # no answer: the check is left to the driver
        assert time.monotonic() - started < 15


def _jobs_server(drop: type[httpx.TransportError]):
    """A job server (httpx.MockTransport) that takes a submitted job, then drops the
    connection before answering the POST."""
    jobs: dict[str, str] = {}
    posts: list[str] = []

    def handle(request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if request.method == "GET" and path.startswith("/api/jobs/"):
            job_id = path.removeprefix("/api/jobs/")
            if job_id in jobs:
                return httpx.Response(200, json={"submission_id": job_id, "status": jobs[job_id]})
            return httpx.Response(404, text="no such job")
        if request.method == "POST" and path == "/api/jobs/":
            job_id = json.loads(request.content)["submission_id"]
            posts.append(job_id)
            jobs[job_id] = "RUNNING"  # the job server took it ...
            raise drop("connection reset by peer", request=request)  # ... the answer is lost
        return httpx.Response(500)

    return httpx.MockTransport(handle), jobs, posts


@pytest.mark.parametrize("drop", [httpx.ReadError, httpx.RemoteProtocolError, httpx.WriteError])
def test_a_connection_dropped_after_sending_is_a_maybe_submitted_job(drop):
    """Not a plain JobsError (the sweep FAILED while its job ran): like a timeout, the
    job may have been taken."""
    transport, _, posts = _jobs_server(drop)
    jobs = RayJobs("http://ray-head:8265", timeout_s=1, transport=transport)
    with pytest.raises(JobsTimedOut, match="connection dropped"):
        jobs.submit("tuner-x-1", "python -m tuner.sweep x", env_vars={}, metadata={})
    assert posts == ["tuner-x-1"]
    assert jobs.status("tuner-x-1") == "RUNNING"


def test_errors_before_sending_are_not_taken_for_a_maybe_submitted_job():
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    jobs = RayJobs("http://ray-head:8265", 1, transport=httpx.MockTransport(refuse))
    with pytest.raises(JobsUnavailable):
        jobs.list()

    def local(request: httpx.Request) -> httpx.Response:
        raise httpx.LocalProtocolError("bad header", request=request)

    jobs = RayJobs("http://ray-head:8265", 1, transport=httpx.MockTransport(local))
    with pytest.raises(JobsError) as err:
        jobs.list()
    assert not isinstance(err.value, JobsTimedOut | JobsUnavailable)


def test_the_supervisor_follows_a_job_whose_submit_answer_was_lost(tmp_path):
    """The sweep keeps its job id and stays RUNNING (followed), and nothing is launched
    twice."""
    settings = Settings(data_dir=tmp_path, ray_address="http://ray-head:8265")
    store = Store(f"sqlite:///{tmp_path / 'tuner.db'}")
    transport, jobs, posts = _jobs_server(httpx.ReadError)
    launcher = Launcher(settings)
    launcher._ready = True  # the cluster is "reached": no probing of ray-head
    launcher._jobs = RayJobs(settings.ray_address, 1, transport=transport)
    try:
        exp = service.submit(store, {"name": "x", "algorithm": "PPO", "env": "CartPole-v1"}, [])
        sup = service.Supervisor(store, launcher, settings)
        sup.tick()
        rec = store.get_experiment(exp.id)
        assert rec.status == "RUNNING"
        assert rec.job_id == posts[0]
        assert rec.error is None
        sup.tick()
        rec = store.get_experiment(exp.id)
        assert rec.status == "RUNNING"
        assert rec.job_id in jobs
        assert len(posts) == 1
    finally:
        store.close()


def test_jobs_and_nodes_requests_load_the_ca_bundle_once(monkeypatch):
    """The supervisor asks for job status every poll interval from the API's process; an
    httpx client made with default TLS settings loads the CA bundle again each time (~45
    ms of CPU here, enough to stall every API request behind it)."""
    import ssl
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from tuner.launcher import ClusterNodes
    from tuner.launcher._jobs import tls_context

    class Dashboard(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            nodes = {"data": {"result": {"result": []}}}
            body = json.dumps([] if self.path.startswith("/api/jobs") else nodes).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    loads: list[str] = []
    real = ssl.create_default_context

    def counting(*args, **kwargs):
        loads.append("ca")
        return real(*args, **kwargs)

    monkeypatch.setattr(ssl, "create_default_context", counting)
    tls_context.cache_clear()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Dashboard)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        address = f"http://127.0.0.1:{server.server_address[1]}"
        jobs = RayJobs(address, timeout_s=5)
        assert [jobs.list() for _ in range(5)] == [[]] * 5
        assert ClusterNodes(address, timeout_s=5).read() == []
    finally:
        server.shutdown()
        server.server_close()
    assert loads == ["ca"]


@pytest.mark.parametrize(
    "body",
    ["404", "Job tuner-x-1 not found", "HTTP 404: job does not exist", "no such job"],
)
def test_a_server_error_that_mentions_a_missing_job_is_not_a_missing_job(body):
    """A missing job is the Jobs API's 404, never an error message's text: a 500 whose body
    says "404" or "not found" is a JobsError (the supervisor leaves the sweep alone), not
    None (which it would take for a dead driver, and relaunch)."""
    asked: list[str] = []

    def failing(request: httpx.Request) -> httpx.Response:
        asked.append(f"{request.method} {request.url.path}")
        return httpx.Response(500, text=body)

    jobs = RayJobs("http://ray-head:8265", 1, transport=httpx.MockTransport(failing))
    with pytest.raises(JobsError) as err:
        jobs.status("tuner-x-1")
    assert err.value.status == 500
    assert not isinstance(err.value, JobNotFound)
    with pytest.raises(JobsError) as err:
        jobs.stop("tuner-x-1")
    assert err.value.status == 500
    assert not isinstance(err.value, JobNotFound)
    with pytest.raises(JobsError):  # not submitted as if the job were missing
        jobs.submit("tuner-x-1", "python -m tuner.sweep x", env_vars={}, metadata={})
    assert asked == ["GET /api/jobs/tuner-x-1", "POST /api/jobs/tuner-x-1/stop"] + [
        "GET /api/jobs/tuner-x-1"
    ]


def test_the_jobs_apis_404_is_a_missing_job_whatever_its_body():
    def missing(request: httpx.Request) -> httpx.Response:
        return httpx.Response(404, text="Internal Server Error")  # the status decides

    jobs = RayJobs("http://ray-head:8265", 1, transport=httpx.MockTransport(missing))
    assert jobs.status("tuner-x-1") is None
    assert jobs.stop("tuner-x-1") is False
    with pytest.raises(JobNotFound) as err:
        jobs.info("tuner-x-1")
    assert err.value.status == 404


def test_the_supervisor_never_takes_a_server_error_for_a_dead_driver(tmp_path):
    """A RUNNING sweep whose job the server answers 500 "job not found" for, long past the
    settle time, stays RUNNING with its job (no relaunch, no error): only a 404 is a
    missing job."""
    settings = Settings(data_dir=tmp_path, ray_address="http://ray-head:8265")
    store = Store(f"sqlite:///{tmp_path / 'tuner.db'}")

    def failing(request: httpx.Request) -> httpx.Response:
        return httpx.Response(500, text="404: job tuner-x-1 not found")

    launcher = Launcher(settings)
    launcher._ready = True
    launcher._jobs = RayJobs(settings.ray_address, 1, transport=httpx.MockTransport(failing))
    try:
        exp = service.submit(store, {"name": "x", "algorithm": "PPO", "env": "CartPole-v1"}, [])
        store.transition(exp.id, "RUNNING", allowed_from={"QUEUED"})
        old = utcnow() - timedelta(hours=1)
        store.update_experiment(exp.id, job_id="tuner-x-1", attempts=1, updated_at=old)
        service.Supervisor(store, launcher, settings).tick()
        rec = store.get_experiment(exp.id)
        assert (rec.status, rec.job_id, rec.attempts, rec.error) == (
            "RUNNING",
            "tuner-x-1",
            1,
            None,
        )
    finally:
        store.close()


def test_head_ports_are_distinct_even_when_the_os_repeats_one(monkeypatch):
    from tuner.launcher import _head

    picks = iter([5001, 5001, 5002, 5001, 5003])
    monkeypatch.setattr(_head, "_free_port", lambda: next(picks))
    assert _head.distinct_free_ports(3) == [5001, 5002, 5003]


@pytest.mark.parametrize(
    "tail, conflict",
    [
        (
            "ValueError: Ray component dashboard is trying to use a port number 42189 that is "
            "used by other components.",
            True,
        ),
        ("Failed to bind: Address already in use", True),
        ("The port 8265 is already occupied", True),
        ("RuntimeError: no token found; run ray get-auth-token --generate", False),
    ],
)
def test_a_head_exit_over_a_port_is_recognised(tail, conflict):
    from tuner.launcher._head import port_conflict

    assert port_conflict(tail) is conflict
