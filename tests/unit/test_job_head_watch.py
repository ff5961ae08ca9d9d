"""Which RAY_ADDRESS a sweep's driver watches before it connects (tuner/sweep/_headwatch.py)."""

from __future__ import annotations

import socket
import threading

import pytest

from tuner.sweep._headwatch import watch_job_head


@pytest.mark.parametrize("address", ["", "auto", "http://127.0.0.1:8265", "ray://h:10001", "h"])
def test_no_watch_without_a_gcs_address(address):
    assert watch_job_head({"RAY_ADDRESS": address}, on_gone=lambda: None) is None
    assert watch_job_head({}, on_gone=lambda: None) is None


def test_a_gcs_address_nobody_answers_is_gone_after_the_misses():
    with socket.socket() as s:  # a port bound, then released: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    gone = threading.Event()
    thread = watch_job_head(
        {"RAY_ADDRESS": f"127.0.0.1:{port}"}, interval_s=0.05, misses=3, on_gone=gone.set
    )
    assert thread is not None
    assert gone.wait(10)


def test_a_gcs_address_that_answers_is_not_gone():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        gone = threading.Event()
        address = f"127.0.0.1:{server.getsockname()[1]}"
        watch_job_head({"RAY_ADDRESS": address}, interval_s=0.05, misses=3, on_gone=gone.set)
        assert not gone.wait(1.0)
