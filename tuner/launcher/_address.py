"""Where a cluster's Jobs API is, from any address Ray's own job client takes
(TUNER_RAY_ADDRESS): the dashboard's http(s):// URL as is; `auto`, a GCS address
`host:port` and a Ray Client address `ray://host:port` through Ray, which asks the
cluster (its GCS keeps the dashboard's address) — so those resolve only while it runs.

They are resolved lazily, at the first request that needs the URL, by Ray's public
`JobSubmissionClient` in a short-lived subprocess: a hard deadline (Ray retries an
unreachable GCS for most of a minute), no Ray state in the API process (a `ray://`
address connects a Ray Client), and none of the caller's RAY_ADDRESS /
RAY_API_SERVER_ADDRESS, which Ray would take over the address it is given.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

from tuner.errors import TunerError

# Ray's variables that override the address its job client is given: the service's own
# setting is the one that counts
_OVERRIDES = ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS")
# the subprocess imports Ray (seconds) before it asks the cluster anything
RESOLVE_AT_LEAST_S = 10.0
# a failed resolution is answered again at once for this long, so the requests that
# follow one (a submit, the node list, the supervisor's poll) do not each wait for it
FAILURE_KEPT_S = 5.0


class ClusterUnreachable(TunerError, ConnectionError):
    """A Ray address could not be resolved to its dashboard (the cluster is down, not
    reachable from here, or has no dashboard); worth trying again later. RayJobs raises
    it as JobsUnavailable."""


def is_dashboard_url(address: str) -> bool:
    """Whether `address` is already the dashboard's (Jobs API's) URL."""
    return address.startswith(("http://", "https://"))


_lock = threading.Lock()
_resolved: dict[str, str] = {}
_failed: dict[str, tuple[float, str]] = {}


def dashboard_url(address: str, timeout_s: float) -> str:
    """The dashboard URL (no trailing slash) of the cluster at `address`, any form Ray's
    JobSubmissionClient takes; resolved once per address and kept. ClusterUnreachable,
    naming the address and why, when Ray cannot find the dashboard within the deadline
    (`timeout_s`, at least RESOLVE_AT_LEAST_S)."""
    if is_dashboard_url(address):
        return address.rstrip("/")
    with _lock:  # one resolution at a time: callers meanwhile wait for its answer
        if address in _resolved:
            return _resolved[address]
        failed_at, why = _failed.get(address, (0.0, ""))
        if why and time.monotonic() - failed_at < FAILURE_KEPT_S:
            raise ClusterUnreachable(why)
        try:
            url = _resolve(address, max(timeout_s, RESOLVE_AT_LEAST_S))
        except ClusterUnreachable as err:
            _failed[address] = (time.monotonic(), str(err))
            raise
        _failed.pop(address, None)
        _resolved[address] = url
        return url


def forget(address: str | None = None) -> None:
    """Drops kept resolutions (all, or one address's): the next use asks Ray again."""
    with _lock:
        for kept in (_resolved, _failed):
            if address is None:
                kept.clear()
            else:
                kept.pop(address, None)


def _resolver_command(address: str) -> list[str]:
    # -c, not -m: run as __main__, the module would be imported a second time by its
    # package (and runpy would warn on stderr, where the answer's reason goes)
    run = "import sys; from tuner.launcher._address import _main; sys.exit(_main(sys.argv[1:]))"
    return [sys.executable, "-c", run, address]


def _resolve(address: str, timeout_s: float) -> str:
    env = {k: v for k, v in os.environ.items() if k not in _OVERRIDES}
    env.setdefault("RAY_AUTH_MODE", "token")  # as the launcher's own requests
    where = f"TUNER_RAY_ADDRESS={address}"
    hint = (
        "is the cluster up and reachable from here? Or give its dashboard's URL "
        "(http://HEAD:8265) instead"
    )
    try:
        done = subprocess.run(
            _resolver_command(address),
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=env,
        )
    except subprocess.TimeoutExpired:
        raise ClusterUnreachable(
            f"{where}: Ray found no dashboard for it within {timeout_s:g} s; {hint}"
        ) from None
    lines = done.stdout.strip().splitlines()
    if done.returncode == 0 and lines and is_dashboard_url(lines[-1].strip()):
        return lines[-1].strip().rstrip("/")
    errors = [line for line in done.stderr.strip().splitlines() if line.strip()]
    why = errors[-1].strip() if errors else f"exit code {done.returncode}"
    raise ClusterUnreachable(f"{where}: Ray could not find its dashboard ({why}); {hint}")


def _main(argv: list[str]) -> int:
    """The subprocess: prints the dashboard URL Ray's job client finds for argv[0], or
    the reason it cannot on the last line of stderr (exit 1)."""
    from ray.job_submission import JobSubmissionClient

    try:
        client = JobSubmissionClient(argv[0])
        print(client.get_address(), flush=True)
    except Exception as err:  # noqa: BLE001 - any failure is the answer, told to the parent
        message = " ".join(str(err).split()) or type(err).__name__
        print(f"{type(err).__name__}: {message}", file=sys.stderr, flush=True)
        return 1
    return 0
