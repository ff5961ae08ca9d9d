"""A sweep's driver ends soon after its Ray head is gone.

A Ray driver whose head (GCS) died keeps trying to reconnect for a minute, busy, while
nothing it could do would reach a trial. The watch polls the head's GCS port; once it
has refused `misses` polls in a row, the driver says so and exits (HEAD_GONE_EXIT).
Tune's experiment state, saved as the sweep went, stays on disk: a resume continues
from it.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

HEAD_GONE_EXIT = 75  # EX_TEMPFAIL: the sweep is resumable
_GCS_ADDRESS = re.compile(r"[\w.\-\[\]:]+:\d+")
_watched: set[str] = set()  # the GCS addresses a watch polls already
logger = logging.getLogger(__name__)


def head_reachable(address: str, timeout_s: float = 1.0) -> bool:
    """Whether something accepts a TCP connection at a GCS address host:port."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            return True
    except (OSError, ValueError):
        return False


def _exit_now() -> None:
    sys.stderr.flush()
    os._exit(HEAD_GONE_EXIT)


def watch_head(
    gcs_address: str,
    *,
    interval_s: float = 1.0,
    misses: int = 5,
    on_gone: Callable[[], None] = _exit_now,
) -> threading.Thread:
    """Starts a daemon thread that calls `on_gone` (default: exit the process) once the
    head at `gcs_address` refused `misses` polls in a row, `interval_s` apart: within
    about misses x (interval_s + 1) seconds of its end."""

    def run() -> None:
        missed = 0
        while True:
            missed = 0 if head_reachable(gcs_address) else missed + 1
            if missed >= misses:
                logger.warning(
                    "the Ray head at %s is gone: the driver exits; the sweep's state is "
                    "saved, a resume continues it",
                    gcs_address,
                )
                on_gone()
                return
            time.sleep(interval_s)

    _watched.add(gcs_address)
    thread = threading.Thread(target=run, name="tuner-head-watch", daemon=True)
    thread.start()
    return thread


def watch_job_head(
    environ: Mapping[str, str] | None = None, **watch: Any
) -> threading.Thread | None:
    """watch_head on the GCS address Ray's job supervisor gives a job's driver
    (RAY_ADDRESS, host:port), before the driver connects: a head that dies while the
    driver starts (imports, the store, ray.init) ends it too. None where RAY_ADDRESS is
    no GCS address (unset, `auto`, a URL)."""
    address = (os.environ if environ is None else environ).get("RAY_ADDRESS", "")
    if not _GCS_ADDRESS.fullmatch(address) or "://" in address:
        return None
    return watch_head(address, **watch)


def watch_connected_head() -> threading.Thread | None:
    """watch_head on the head this process's Ray is connected to (None: not connected)."""
    import ray

    if not ray.is_initialized():
        return None
    address = ray.get_runtime_context().gcs_address
    return watch_head(address) if address and address not in _watched else None
