"""Sweeps as Ray Jobs: submit, stop, status; and the embedded one-node Ray head.

With `TUNER_RAY_ADDRESS` set, jobs go to that cluster's job server. Without it,
the service starts a Ray head of its own (`ray start --head --block`, in its own
process group) and remembers it in `<data_dir>/ray-head.json`, so a restarted
API server follows the jobs of the head it started before instead of starting a
second one. Only a head this process started is stopped on shutdown.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from tuner.settings import Settings

log = logging.getLogger("tuner.launcher")
JOB_TERMINAL = {"STOPPED", "SUCCEEDED", "FAILED"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _is_loopback(address: str) -> bool:
    host = address.split("://")[-1].split(":")[0]
    return host in {"127.0.0.1", "localhost", "::1", "[::1]"}


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _dashboard_up(url: str) -> bool:
    try:
        return httpx.get(f"{url}/api/version", timeout=2).status_code < 500
    except httpx.HTTPError:
        return False


def _job_client(address: str, timeout_s: float) -> Any:
    """A Ray JobSubmissionClient whose every request has a deadline: a hung dashboard
    makes a call fail (and the supervisor retry) instead of stalling its thread."""
    from ray.job_submission import JobSubmissionClient

    class _Client(JobSubmissionClient):
        def _do_request(self, method: str, endpoint: str, **kwargs: Any) -> Any:
            kwargs.setdefault("timeout", timeout_s)
            return super()._do_request(method, endpoint, **kwargs)

    return _Client(address)


class Launcher:
    """Submits each sweep's driver as a Ray Job and follows it."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.address: str | None = settings.ray_address
        self.head_file = settings.data_path / "ray-head.json"
        self._head: subprocess.Popen | None = None
        self._client: Any = None
        self._nodes: tuple[float, list[dict[str, Any]] | None] = (0.0, None)
        self._ready = False
        os.environ.setdefault("RAY_AUTH_MODE", "token")

    # -- the cluster ----------------------------------------------------------------

    def start(self, num_cpus: int | None = None, wait_s: float = 90) -> str:
        """Connects to the configured cluster or starts / reuses the embedded head."""
        if self.address:
            if not self._ready:  # once: a busy job server must not stall every submit
                self._wait_for_job_agent(self.address, time.monotonic() + wait_s / 3)
                self._ready = True
            return self.address
        known = self._known_head()
        if known:
            self.address = known
            return known
        port, dash = _free_port(), _free_port()
        cmd = [
            str(Path(sys.executable).with_name("ray")),
            "start",
            "--head",
            "--block",
            f"--port={port}",
            "--dashboard-host=127.0.0.1",
            f"--dashboard-port={dash}",
            "--include-dashboard=true",
            "--disable-usage-stats",
            # the agent's default port (52365) is taken by any other Ray on this host
            f"--dashboard-agent-listen-port={_free_port()}",
            # A temp dir of its own: Ray's "auto" address (which a Ray Job's driver is
            # given) reads the newest cluster from <temp dir>/ray_current_cluster, so in
            # the shared /tmp/ray another Ray started later on this host would capture
            # our sweeps, and a user's ray.init() would attach to our head.
            f"--temp-dir={self.temp_dir}",
        ]
        if num_cpus is not None:
            cmd.append(f"--num-cpus={num_cpus}")
        if self.settings.embedded_nice:
            cmd = ["nice", "-n", str(self.settings.embedded_nice), *cmd]
        log = open(self.settings.data_path / "ray-head.log", "ab")  # noqa: SIM115 - child owns it
        env = {**os.environ, "RAY_AUTH_MODE": os.environ["RAY_AUTH_MODE"]}
        self._head = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        url = f"http://127.0.0.1:{dash}"
        deadline = time.monotonic() + wait_s
        while not _dashboard_up(url):
            if self._head.poll() is not None or time.monotonic() > deadline:
                self.stop_head()
                raise RuntimeError(f"the embedded Ray head did not start; see {log.name}")
            time.sleep(0.5)
        self._wait_for_job_agent(url, deadline)
        self.head_file.write_text(
            json.dumps(
                {
                    "pid": self._head.pid,
                    "address": url,
                    "gcs": f"127.0.0.1:{port}",
                    "temp_dir": self.temp_dir,
                }
            )
        )
        self.address, self._ready = url, True
        return url

    def _wait_for_job_agent(self, url: str, deadline: float) -> None:
        while time.monotonic() < deadline:
            try:
                self.client(url).list_jobs()
                return
            except Exception:  # noqa: BLE001 - the job agent comes up after the dashboard
                time.sleep(0.5)

    def _known_head(self) -> str | None:
        if not self.head_file.exists():
            return None
        try:
            info = json.loads(self.head_file.read_text())
        except (OSError, ValueError):
            return None
        if _pid_alive(int(info["pid"])) and _dashboard_up(info["address"]):
            if "temp_dir" not in info:
                log.warning(
                    "reusing Ray head pid %s started by an older tuner in the shared "
                    "/tmp/ray: a Ray started later on this host could receive its sweeps; "
                    "stop that head (kill %s) to get one with a temp dir of its own",
                    info["pid"],
                    info["pid"],
                )
            return info["address"]
        return None

    @property
    def temp_dir(self) -> str:
        """The embedded head's Ray temp dir: short (Ray's socket paths must stay under
        108 bytes) and one per data dir."""
        digest = hashlib.sha1(str(self.settings.data_path).encode()).hexdigest()[:12]
        # /tmp as Ray itself uses: macOS's per-user temp dir is too long a prefix
        base = Path("/tmp") if Path("/tmp").is_dir() else Path(tempfile.gettempdir())
        return str(base / f"tuner-ray-{os.getuid()}-{digest}")

    @property
    def started_head(self) -> bool:
        """Whether this process started the embedded head (and so stops it)."""
        return self._head is not None

    def stop_head(self, timeout_s: float = 10) -> None:
        """Stops the embedded head if this process started it (its own process group)."""
        if self._head is None:
            return
        try:
            os.killpg(self._head.pid, signal.SIGTERM)
            self._head.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(self._head.pid, signal.SIGKILL)
            self._head.wait()
        except ProcessLookupError:
            pass
        self._head = None
        self.head_file.unlink(missing_ok=True)

    # -- jobs -----------------------------------------------------------------------

    def client(self, address: str | None = None) -> Any:
        """A Ray JobSubmissionClient for the cluster (imported lazily: routes never
        import ray), with `ray_request_timeout_s` on every request."""
        timeout_s = self.settings.ray_request_timeout_s
        if address is not None:
            return _job_client(address, timeout_s)
        if self._client is None:
            self._client = _job_client(self.start(), timeout_s)
        return self._client

    def cluster(self, max_age_s: float = 10) -> list[dict[str, Any]] | None:
        """Each alive node: {node_id, node_ip, is_head, resources ({"CPU": 16.0, "GPU":
        1.0, ...})}, from the dashboard's state API; [] while no node has registered yet
        (a head just started); None when the cluster cannot say (not started,
        unreachable). A non-empty list, or a failure, is reused for `max_age_s`."""
        fetched_at, cached = self._nodes
        if fetched_at and time.monotonic() - fetched_at < max_age_s:
            return cached
        nodes, failed = None, False
        if self.address is not None:
            try:
                client = self._client or _job_client(
                    self.address, self.settings.ray_request_timeout_s
                )
                rows = client._do_request("GET", "/api/v0/nodes?limit=10000").json()
                nodes = [
                    {
                        "node_id": row["node_id"],
                        "node_ip": row.get("node_ip"),
                        "is_head": bool(row.get("is_head_node")),
                        "resources": {
                            k: float(v) for k, v in (row.get("resources_total") or {}).items()
                        },
                    }
                    for row in rows["data"]["result"]["result"]
                    if row.get("state") == "ALIVE"
                ]
            except Exception:  # noqa: BLE001 - no answer: the driver checks before running
                log.warning("could not read the cluster's nodes", exc_info=True)
                failed = True
        if nodes or failed:  # an empty list: nodes still registering, ask again
            self._nodes = (time.monotonic(), nodes)
        return nodes

    def cluster_nodes(self, max_age_s: float = 10) -> list[dict[str, float]] | None:
        """Total resources of each alive node (see `cluster`), for the fit check."""
        nodes = self.cluster(max_age_s)
        return [n["resources"] for n in nodes] if nodes else None  # none: the driver checks

    def job_env(self) -> dict[str, str]:
        """The TUNER_* settings (and PYTHONPATH) a driver needs, resolved to absolute."""
        s = self.settings
        env = {
            "TUNER_DATA_DIR": str(s.data_path),
            "TUNER_STORAGE_PATH": s.tune_storage,
            "TUNER_MLFLOW_TRACKING_URI": s.tracking_uri,
            "TUNER_MLFLOW_UI_URL": s.mlflow_ui_url,
            "TUNER_DATABASE_URL": s.store_url,
            "TUNER_CLUSTER_FIT_CHECK": str(s.cluster_fit_check).lower(),
            "TUNER_STOP_TIMEOUT_S": str(s.stop_timeout_s),
            "RAY_AUTH_MODE": os.environ.get("RAY_AUTH_MODE", "token"),
        }
        if not s.mlflow_tracking_uri:
            env.pop("TUNER_MLFLOW_TRACKING_URI")  # embedded: the driver derives the same
        paths = [os.getcwd(), *os.environ.get("PYTHONPATH", "").split(os.pathsep)]
        env["PYTHONPATH"] = os.pathsep.join(p for p in dict.fromkeys(paths) if p)
        return env

    def submit(self, experiment_id: str, job_id: str, resume: bool) -> str:
        """Submits the driver of one sweep as job `job_id` (idempotent); returns the id."""
        python = self.settings.driver_python or (
            sys.executable if _is_loopback(self.start()) else "python"
        )
        entrypoint = f"{python} -m tuner.trials {experiment_id}" + (" --resume" if resume else "")
        try:
            return self.client().submit_job(
                entrypoint=entrypoint,
                submission_id=job_id,
                runtime_env={"env_vars": self.job_env()},
                metadata={"tuner.experiment_id": experiment_id},
            )
        except RuntimeError as err:
            if "already exists" in str(err):
                return job_id
            raise

    def status(self, job_id: str) -> str | None:
        """The job's status (PENDING RUNNING STOPPED SUCCEEDED FAILED), None if unknown."""
        try:
            return str(self.client().get_job_status(job_id).value)
        except RuntimeError as err:
            if "does not exist" in str(err) or "404" in str(err):
                return None
            raise  # the job server is unwell: not a reason to think the driver died

    def stop(self, job_id: str) -> None:
        """Hard-stops a job (SIGTERM, then SIGKILL by Ray)."""
        try:
            self.client().stop_job(job_id)
        except RuntimeError:
            pass

    def logs_tail(self, job_id: str, chars: int = 3000) -> str:
        """The end of a job's driver log (for a failed sweep's error)."""
        try:
            return self.client().get_job_logs(job_id)[-chars:]
        except Exception:  # noqa: BLE001 - the log is a courtesy; the sweep's outcome is not
            return ""
