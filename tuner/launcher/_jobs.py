"""Ray Jobs over the dashboard's public Jobs REST API (`/api/jobs/`), with a deadline on
every request and errors told apart by status code, never by message text."""

from __future__ import annotations

import functools
import os
import ssl
from pathlib import Path
from typing import Any

import httpx

from tuner.errors import TunerError
from tuner.launcher._address import ClusterUnreachable, dashboard_url

JOB_TERMINAL = {"STOPPED", "SUCCEEDED", "FAILED"}


class JobsError(TunerError, RuntimeError):
    """The job server answered with an error, or could not be asked.

    Args:
        message: What went wrong.
        status: The HTTP status of the answer, if one came.
    """

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class JobsUnavailable(JobsError):
    """The job server is not reachable or not ready yet (worth retrying later)."""


class JobsTimedOut(JobsError):
    """The request was sent but its answer never came.

    It timed out, or the connection dropped before the answer: it may have taken effect.
    """


class JobNotFound(JobsError):
    """The job server does not know this job (HTTP 404)."""


def token_auth_on() -> bool:
    """Whether Ray's token authentication is on for this process (RAY_AUTH_MODE=token)."""
    return os.environ.get("RAY_AUTH_MODE", "").lower() == "token"


def auth_token() -> str:
    """Ray's token as Ray finds it: RAY_AUTH_TOKEN, the file RAY_AUTH_TOKEN_PATH, or
    ~/.ray/auth_token ("" when there is none)."""
    token = os.environ.get("RAY_AUTH_TOKEN", "").strip()
    if token:
        return token
    path = Path(os.environ.get("RAY_AUTH_TOKEN_PATH") or Path.home() / ".ray" / "auth_token")
    try:
        return path.expanduser().read_text().strip()
    except OSError:
        return ""


def auth_headers() -> dict[str, str]:
    """Ray's token header when token authentication is on."""
    token = auth_token() if token_auth_on() else ""
    return {"Authorization": f"Bearer {token}"} if token else {}


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The TLS settings of every request to Ray's dashboard, made once: an httpx client
    made without them loads the CA bundle again, and the service's supervisor asks for
    job status every poll interval, in the API's process (the cost measured:
    docs/benchmarks-history.md)."""
    return httpx.create_ssl_context()


# Transport errors raised before the request left this process: it cannot have taken effect.
_NOT_SENT = (httpx.LocalProtocolError, httpx.UnsupportedProtocol, httpx.ProxyError)


class RayJobs:
    """Submit, follow and stop Ray Jobs on one cluster's dashboard.

    Args:
        address: Any form Ray's job client takes (tuner.launcher._address), resolved to
            the dashboard's URL at the first request.
        timeout_s: The deadline of each request.
        transport: httpx's (tests pass an httpx.MockTransport); default a fresh
            connection per request, with the TLS settings made once (`tls_context`).
    """

    def __init__(
        self, address: str, timeout_s: float, transport: httpx.BaseTransport | None = None
    ) -> None:
        self.address = address.rstrip("/")
        self.timeout_s = timeout_s
        self.transport = transport

    @property
    def url(self) -> str:
        """The dashboard's URL.

        Raises JobsUnavailable while a GCS or Ray Client address cannot be resolved (the
        cluster down or unreachable: worth trying again).
        """
        try:
            return dashboard_url(self.address, self.timeout_s)
        except ClusterUnreachable as err:
            raise JobsUnavailable(str(err)) from err

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        url = self.url
        try:
            with httpx.Client(
                transport=self.transport, timeout=self.timeout_s, verify=tls_context()
            ) as client:
                response = client.request(method, f"{url}{path}", headers=auth_headers(), **kwargs)
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as err:
            raise JobsUnavailable(f"{method} {path}: {err!r}") from err
        except httpx.TimeoutException as err:  # sent; the answer never came
            raise JobsTimedOut(f"{method} {path}: no answer in {self.timeout_s} s") from err
        except _NOT_SENT as err:
            raise JobsError(f"{method} {path}: {err!r}") from err
        except httpx.TransportError as err:  # sent; the connection dropped (read, reset)
            raise JobsTimedOut(
                f"{method} {path}: the connection dropped before the answer: {err!r}"
            ) from err
        except httpx.HTTPError as err:
            raise JobsError(f"{method} {path}: {err!r}") from err
        if response.status_code == 404:
            raise JobNotFound(f"{method} {path}: no such job", 404)
        if response.status_code >= 400:
            text = response.text[:2000]
            # the job server answers 500 while its job agent is still starting
            unready = response.status_code >= 500 and "try again later" in text
            kind = JobsUnavailable if unready else JobsError
            raise kind(
                f"{method} {path}: HTTP {response.status_code}: {text}", response.status_code
            )
        return response

    def list(self) -> list[dict[str, Any]]:
        """Every job the server knows.

        Returns:
            Each job's JobDetails as JSON.
        """
        return self._request("GET", "/api/jobs/").json()

    def info(self, job_id: str) -> dict[str, Any]:
        """One job's details.

        Args:
            job_id: The Ray job's id.

        Returns:
            Its JobDetails as JSON.

        Raises:
            JobNotFound: The server does not know the job.
        """
        return self._request("GET", f"/api/jobs/{job_id}").json()

    def status(self, job_id: str) -> str | None:
        """A job's status.

        Args:
            job_id: The Ray job's id.

        Returns:
            PENDING RUNNING STOPPED SUCCEEDED FAILED, or None for an unknown job.
        """
        try:
            return str(self.info(job_id)["status"])
        except JobNotFound:
            return None

    def submit(
        self,
        job_id: str,
        entrypoint: str,
        *,
        env_vars: dict[str, str],
        metadata: dict[str, str],
    ) -> str:
        """Submits the job `job_id` once.

        A job of that id already there is taken as this submission (a retry after a lost
        answer launches nothing new).

        Args:
            job_id: The Ray job's id.
            entrypoint: The driver's command line.
            env_vars: The driver's environment variables.
            metadata: The job's metadata.

        Returns:
            The job's id.
        """
        if self.status(job_id) is not None:
            return job_id
        body = {
            "entrypoint": entrypoint,
            "submission_id": job_id,
            "runtime_env": {"env_vars": env_vars},
            "metadata": metadata,
        }
        try:
            self._request("POST", "/api/jobs/", json=body)
        except JobsError as err:
            if err.status == 400 and self.status(job_id) is not None:
                return job_id  # taken by a submission racing this one
            raise
        return job_id

    def stop(self, job_id: str) -> bool:
        """Asks Ray to stop the job (SIGTERM, then SIGKILL).

        Args:
            job_id: The Ray job's id.

        Returns:
            Whether it was running.
        """
        try:
            return bool(self._request("POST", f"/api/jobs/{job_id}/stop").json().get("stopped"))
        except JobNotFound:
            return False

    def logs(self, job_id: str) -> str:
        """The job's driver log.

        Args:
            job_id: The Ray job's id.

        Returns:
            The log's text.
        """
        return str(self._request("GET", f"/api/jobs/{job_id}/logs").json().get("logs", ""))
