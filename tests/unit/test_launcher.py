"""The launcher's Ray Jobs client gives up on a dashboard that never answers."""

from __future__ import annotations

import socket
import time

import pytest

from tuner.launcher import JobsTimedOut, Launcher, RayJobs
from tuner.settings import Settings


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
