"""Where sweeps run: the Ray cluster, its jobs and its nodes.

The cluster: the embedded head or TUNER_RAY_ADDRESS's. Public Ray interfaces only: the
dashboard's Jobs REST API and its state API, over HTTP with a deadline on every request.

- `_head.py`: EmbeddedHead, the one-node head started when no cluster is configured
- `_jobs.py`: RayJobs, submit / status / stop / logs of the sweeps' driver jobs
- `_cluster.py`: ClusterNodes, the alive nodes and their resources
- `_local.py`: ensure_ray, the Ray a sweep's driver process connects to or starts
- `_address.py`: dashboard_url, the Jobs API's URL from any address Ray's job client
  takes (TUNER_RAY_ADDRESS: the URL itself, `auto`, host:port of the GCS, ray://)
- `_mlflow_ui.py`: start_mlflow_ui, wait_for_mlflow_ui, stop_process_group, the MLflow UI
  process `tuner serve --mlflow-ui` runs beside the embedded store
"""

from __future__ import annotations

import logging
import os
import sys
import time
from typing import Any

from tuner.launcher._cluster import ClusterNodes
from tuner.launcher._head import EmbeddedHead
from tuner.launcher._jobs import (
    JOB_TERMINAL,
    JobNotFound,
    JobsError,
    JobsTimedOut,
    JobsUnavailable,
    RayJobs,
)
from tuner.launcher._local import RayStartError, ensure_ray, stop_local_ray
from tuner.launcher._mlflow_ui import start_mlflow_ui, stop_process_group, wait_for_mlflow_ui
from tuner.settings import Settings

log = logging.getLogger("tuner.launcher")


def _is_loopback(address: str) -> bool:
    """Whether a Ray address or dashboard URL is on this machine.

    `auto`: Ray's own word for the cluster started here.
    """
    if address == "auto":
        return True
    host = address.split("://")[-1].split(":")[0]
    return host in {"127.0.0.1", "localhost", "::1", "[::1]"}


class Launcher:
    """The service's handle on its cluster: which one (start), its jobs, its nodes.

    Args:
        settings: The service's settings (TUNER_RAY_ADDRESS, the data dir, timeouts).
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.address: str | None = settings.ray_address
        self.head = EmbeddedHead(settings)
        self._jobs: RayJobs | None = None
        self._nodes: ClusterNodes | None = None
        self._ready = False
        os.environ.setdefault("RAY_AUTH_MODE", "token")

    # -- which cluster ----------------------------------------------------------------

    def start(self, num_cpus: int | None = None, wait_s: float = 90) -> str:
        """Connects to the configured cluster or starts / reuses the embedded head.

        Args:
            num_cpus: The CPUs an embedded head offers (default: Ray's count).
            wait_s: How long to wait for the head and its job server.

        Returns:
            The cluster's address (the embedded head's dashboard URL).
        """
        if self.address and self._ready:
            return self.address
        deadline = time.monotonic() + wait_s
        if self.address:  # once: a busy job server must not stall every submit
            self._wait_for_job_agent(self.address, time.monotonic() + wait_s / 3)
            self._ready = True
            return self.address
        known = self.head.known()
        if known:
            self.address, self._ready = known, True
            return known
        url = self.head.start(num_cpus, deadline)
        self._wait_for_job_agent(url, deadline)
        self.address, self._ready = url, True
        return url

    def restart_lost_head(self, num_cpus: int | None = None) -> bool:
        """Starts the embedded head again where the one this service uses is gone.

        Gone: killed, or by its machine's OOM killer. Its jobs are gone with it; the
        supervisor then finds their ids unknown and resumes their sweeps from Tune's saved
        state. A cluster of TUNER_RAY_ADDRESS is never started here.

        Args:
            num_cpus: The CPUs the new head offers (default: Ray's count).

        Returns:
            True when it started a new one.
        """
        if self.settings.ray_address or not self._ready or self.head.alive():
            return False
        log.warning("the embedded Ray head is gone: starting a new one")
        self.head.process = None
        self.head.head_file.unlink(missing_ok=True)
        self._ready, self._jobs, self._nodes = False, None, None
        self.address = None
        self.start(num_cpus)
        return True

    def _wait_for_job_agent(self, url: str, deadline: float) -> None:
        jobs = RayJobs(url, self.settings.ray_request_timeout_s)
        last: JobsError | None = None
        while time.monotonic() < deadline:
            try:
                jobs.list()
                return
            except JobsError as err:  # the job agent comes up after the dashboard
                last = err
                time.sleep(0.5)
        # serving goes on (the cluster may come up later; submissions retry), but the
        # reason is said once here, not only in each failed submission
        log.warning("the Ray job server at %s did not answer yet: %s", url, last or "no time")

    @property
    def temp_dir(self) -> str:
        """The embedded head's Ray temp dir (see EmbeddedHead)."""
        return self.head.temp_dir

    @property
    def head_file(self) -> Any:
        """Where the embedded head is recorded."""
        return self.head.head_file

    @property
    def started_head(self) -> bool:
        """Whether this process started the embedded head (and so stops it)."""
        return self.head.started

    def stop_head(self, timeout_s: float = 10) -> None:
        """Stops the embedded head if this process started it.

        Args:
            timeout_s: How long to wait for it to exit before killing it.
        """
        self.head.stop(timeout_s)

    # -- jobs -------------------------------------------------------------------------

    @property
    def jobs(self) -> RayJobs:
        """The cluster's Jobs API (starting or reaching the cluster first)."""
        if self._jobs is None:
            self._jobs = RayJobs(self.start(), self.settings.ray_request_timeout_s)
        return self._jobs

    def job_env(self) -> dict[str, str]:
        """The TUNER_* settings (and PYTHONPATH) a driver needs, resolved to absolute.

        Never a secret: a job's runtime_env is shown by the Ray dashboard and its Jobs
        API. The store's URL (it may hold a password) reaches the driver through the Ray
        nodes' own environment instead: the embedded head is started with it; on a
        cluster of your own, set TUNER_DATABASE_URL on the head node. The default SQLite
        store the driver derives from TUNER_DATA_DIR.

        Returns:
            The environment variables, by name.
        """
        s = self.settings
        env = {
            "TUNER_DATA_DIR": str(s.data_path),
            "TUNER_STORAGE_PATH": s.tune_storage,
            "TUNER_MLFLOW_TRACKING_URI": s.tracking_uri,
            "TUNER_MLFLOW_UI_URL": s.mlflow_ui_url,
            "TUNER_CLUSTER_FIT_CHECK": str(s.cluster_fit_check).lower(),
            "TUNER_CLUSTER_MAX_NODES": s.cluster_max_nodes or "",
            "TUNER_STOP_TIMEOUT_S": str(s.stop_timeout_s),
            "TUNER_ALLOWED_MODULES": s.allowed_modules,
            "RAY_AUTH_MODE": os.environ.get("RAY_AUTH_MODE", "token"),
        }
        if not s.mlflow_tracking_uri:
            env.pop("TUNER_MLFLOW_TRACKING_URI")  # embedded: the driver derives the same
        paths = [os.getcwd(), *os.environ.get("PYTHONPATH", "").split(os.pathsep)]
        env["PYTHONPATH"] = os.pathsep.join(p for p in dict.fromkeys(paths) if p)
        return env

    def submit(self, experiment_id: str, job_id: str, resume: bool) -> str:
        """Submits the driver of one sweep as job `job_id` (idempotent).

        Args:
            experiment_id: The sweep the driver runs.
            job_id: The Ray job's id.
            resume: Whether the driver resumes the sweep from Tune's saved state.

        Returns:
            The job's id.
        """
        # the address as given or its dashboard's URL: Ray may name this machine's
        # dashboard by the node's IP
        here = _is_loopback(self.start()) or _is_loopback(self.jobs.url)
        python = self.settings.driver_python or (sys.executable if here else "python")
        entrypoint = f"{python} -m tuner.sweep {experiment_id}" + (" --resume" if resume else "")
        return self.jobs.submit(
            job_id,
            entrypoint,
            env_vars=self.job_env(),
            metadata={"tuner.experiment_id": experiment_id},
        )

    def status(self, job_id: str) -> str | None:
        """The job's status (PENDING RUNNING STOPPED SUCCEEDED FAILED).

        Args:
            job_id: The Ray job's id.

        Returns:
            The status; None if the job server does not know the job.

        Raises:
            JobsError: The job server cannot say (never taken for a dead driver).
        """
        return self.jobs.status(job_id)

    def stop(self, job_id: str) -> None:
        """Hard-stops a job (SIGTERM, then SIGKILL by Ray).

        Args:
            job_id: The Ray job's id.
        """
        try:
            self.jobs.stop(job_id)
        except JobsError:
            pass

    def logs_tail(self, job_id: str, chars: int = 3000) -> str:
        """The end of a job's driver log (for a failed sweep's error).

        Args:
            job_id: The Ray job's id.
            chars: How many characters of its end.

        Returns:
            The log's end; "" when the job server cannot give it.
        """
        try:
            return self.jobs.logs(job_id)[-chars:]
        except JobsError:  # the log is a courtesy; the sweep's outcome is not
            return ""

    # -- nodes ------------------------------------------------------------------------

    def cluster(self, max_age_s: float = 10) -> list[dict[str, Any]] | None:
        """Each alive node of the cluster.

        Args:
            max_age_s: How old a cached answer may be.

        Returns:
            Each alive node: {node_id, node_ip, is_head, resources ({"CPU": 16.0, "GPU":
            1.0, ...})}; [] while no node has registered yet (a head just started); None
            when the cluster cannot say (not started, unreachable).
        """
        address = self.address  # once: a head restart in another thread resets it
        if address is None:
            return None
        nodes = self._nodes
        if nodes is None or nodes.address != address.rstrip("/"):
            nodes = self._nodes = ClusterNodes(address, self.settings.ray_request_timeout_s)
        return nodes.nodes(max_age_s)

    def cluster_nodes(self, max_age_s: float = 10) -> list[dict[str, float]] | None:
        """Total resources of each alive node (see `cluster`), for the fit check.

        Args:
            max_age_s: How old a cached answer may be.

        Returns:
            Each node's resources, with the nodes an autoscaler can add; None where no node
            is known (the driver checks then).
        """
        nodes = self.cluster(max_age_s)
        if not nodes:
            return None  # none: the driver checks
        # an autoscaling cluster: what it can grow to counts too
        return [n["resources"] for n in nodes] + self.settings.growth_nodes


__all__ = [
    "ensure_ray",
    "stop_local_ray",
    "RayStartError",
    "JOB_TERMINAL",
    "ClusterNodes",
    "EmbeddedHead",
    "JobNotFound",
    "JobsError",
    "JobsTimedOut",
    "JobsUnavailable",
    "Launcher",
    "RayJobs",
    "start_mlflow_ui",
    "stop_process_group",
    "wait_for_mlflow_ui",
]
