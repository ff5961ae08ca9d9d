"""TUNER_RAY_ADDRESS in every form Ray's job client takes: the dashboard's URL, `auto`,
the GCS address host:port and ray://. The forms are checked without a cluster; the
launcher resolves the last three to the dashboard through Ray at first use (here a
stand-in resolver, and Ray's own against an address where nothing answers)."""

from __future__ import annotations

import json
import sys
import time

import httpx
import pytest
from pydantic import ValidationError

from tuner.launcher import ClusterNodes, JobsUnavailable, Launcher, RayJobs, _address
from tuner.settings import Settings


@pytest.fixture(autouse=True)
def _fresh_resolutions():
    _address.forget()
    yield
    _address.forget()


@pytest.mark.parametrize(
    "given, kept",
    [
        ("http://head:8265", "http://head:8265"),
        ("https://head:8265/", "https://head:8265/"),
        ("http://user:secret@head", "http://user:secret@head"),
        ("head:6379", "head:6379"),
        (" 10.0.0.7:6379 ", "10.0.0.7:6379"),
        ("[::1]:6379", "[::1]:6379"),
        ("auto", "auto"),
        ("ray://head:10001", "ray://head:10001"),
        ("", None),
    ],
)
def test_every_form_rays_job_client_takes_is_accepted(monkeypatch, given, kept):
    assert Settings(ray_address=given).ray_address == kept
    monkeypatch.setenv("TUNER_RAY_ADDRESS", given)
    assert Settings().ray_address == kept


@pytest.mark.parametrize(
    "given",
    ["head", "head:", "head:abc", "head:0", "head:70000", "::1:6379", "[::1]", "a b:6379"]
    + ["ftp://head:8265", "http://", "ray://", "gcs://head:6379", "http://head:99999"],
)
def test_what_is_no_ray_address_is_refused_naming_the_forms(given):
    with pytest.raises(ValidationError) as err:
        Settings(ray_address=given)
    (issue,) = err.value.errors()
    assert issue["loc"] == ("ray_address",)
    for form in ("http://HEAD:8265", "HEAD:6379", "auto", "ray://HEAD:10001"):
        assert form in issue["msg"]


def _stand_in(monkeypatch, tmp_path, body: str) -> object:
    """The resolver's subprocess replaced by `python -c body ADDRESS`; each run leaves a
    line in the returned file."""
    runs = tmp_path / "runs"
    script = f"import os, sys; open({str(runs)!r}, 'a').write('run\\n'); {body}"
    monkeypatch.setattr(_address, "_resolver_command", lambda a: [sys.executable, "-c", script, a])
    return runs


def test_a_dashboard_url_is_used_as_is_without_asking_ray(monkeypatch):
    def never(*args, **kwargs):
        raise AssertionError("Ray was asked")

    monkeypatch.setattr(_address.subprocess, "run", never)
    assert _address.dashboard_url("http://head:8265/", 1) == "http://head:8265"


def test_a_gcs_address_is_resolved_once_and_jobs_go_to_its_dashboard(monkeypatch, tmp_path):
    runs = _stand_in(monkeypatch, tmp_path, "print('log line'); print('http://10.0.0.7:8265/')")
    asked: list[str] = []

    def job_server(request: httpx.Request) -> httpx.Response:
        asked.append(str(request.url))
        return httpx.Response(200, json=[])

    jobs = RayJobs("head:6379", 5, transport=httpx.MockTransport(job_server))
    assert jobs.list() == []
    assert jobs.list() == []
    assert asked == ["http://10.0.0.7:8265/api/jobs/"] * 2
    assert runs.read_text().count("run") == 1  # kept after the first resolution
    read: list[str] = []

    def get(url: str, **kwargs: object) -> httpx.Response:
        read.append(url)
        body = {"data": {"result": {"result": []}}}
        return httpx.Response(200, json=body, request=httpx.Request("GET", url))

    monkeypatch.setattr("tuner.launcher._cluster.httpx.get", get)
    assert ClusterNodes("head:6379", 5).read() == []
    assert read == ["http://10.0.0.7:8265/api/v0/nodes"]


def test_rays_own_overrides_of_the_address_are_not_passed_on(monkeypatch, tmp_path):
    """Ray's client takes RAY_ADDRESS over the address it is given; the service's own
    setting is the one that counts."""
    body = "print('http://' + os.environ.get('RAY_ADDRESS', 'unset') + ':8265')"
    _stand_in(monkeypatch, tmp_path, body)
    monkeypatch.setenv("RAY_ADDRESS", "elsewhere:6379")
    assert _address.dashboard_url("head:6379", 5) == "http://unset:8265"


def test_an_unresolvable_address_is_a_transient_error_naming_it(monkeypatch, tmp_path):
    body = "print('RpcError: Timed out while waiting for GCS', file=sys.stderr); sys.exit(1)"
    runs = _stand_in(monkeypatch, tmp_path, body)
    jobs = RayJobs("head:6379", 5)
    with pytest.raises(JobsUnavailable) as err:  # the supervisor retries these
        jobs.list()
    text = str(err.value)
    assert "TUNER_RAY_ADDRESS=head:6379" in text
    assert "Timed out while waiting for GCS" in text
    assert "http://HEAD:8265" in text  # what to give instead
    with pytest.raises(JobsUnavailable):
        jobs.list()  # answered from the failure just kept, not by a second resolution
    assert runs.read_text().count("run") == 1
    assert ClusterNodes("head:6379", 5).nodes() is None  # the fit check is left to the driver


def test_a_resolution_past_its_deadline_ends_with_a_clear_error(monkeypatch, tmp_path):
    _stand_in(monkeypatch, tmp_path, "import time; time.sleep(60)")
    monkeypatch.setattr(_address, "RESOLVE_AT_LEAST_S", 0.0)
    started = time.monotonic()
    with pytest.raises(_address.ClusterUnreachable, match="no dashboard for it within 2 s"):
        _address.dashboard_url("head:6379", 2)
    assert time.monotonic() - started < 30


def test_rays_own_resolver_gives_up_on_a_gcs_where_nothing_answers(monkeypatch, tmp_path):
    """The real subprocess (Ray's JobSubmissionClient): it starts, asks, and is ended at
    the deadline with the address named, without a cluster anywhere."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        nothing = f"127.0.0.1:{s.getsockname()[1]}"
    monkeypatch.setattr(_address, "RESOLVE_AT_LEAST_S", 0.0)
    started = time.monotonic()
    with pytest.raises(_address.ClusterUnreachable, match=f"TUNER_RAY_ADDRESS={nothing}"):
        _address.dashboard_url(nothing, 8)
    assert time.monotonic() - started < 40


def test_a_driver_on_this_machine_gets_this_python(monkeypatch, tmp_path):
    """`auto` is Ray's word for the cluster started on this machine; a GCS address
    resolves to a dashboard that may be named by the node's IP."""
    _stand_in(monkeypatch, tmp_path, "print('http://10.0.0.7:8265')")
    posted: list[dict] = []

    def job_server(request: httpx.Request) -> httpx.Response:
        if request.method == "POST":
            posted.append(json.loads(request.content))
            return httpx.Response(200, json={"submission_id": "j"})
        return httpx.Response(404)

    for address, python in [("auto", sys.executable), ("head:6379", "python")]:
        launcher = Launcher(Settings(data_dir=tmp_path, ray_address=address))
        launcher._ready = True  # the cluster is "reached"
        launcher._jobs = RayJobs(address, 5, transport=httpx.MockTransport(job_server))
        launcher.submit("exp", "j", resume=False)
        assert posted[-1]["entrypoint"].split()[0] == python
