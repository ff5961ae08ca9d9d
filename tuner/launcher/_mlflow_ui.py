"""The MLflow UI beside the embedded store (`tuner serve --mlflow-ui`, `make run`): an
`mlflow server` process of its own, started, waited for and stopped with its process
group."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tuner.settings import Settings

log = logging.getLogger("tuner.launcher")


def start_mlflow_ui(settings: Settings, port: int) -> subprocess.Popen | None:
    """Starts `mlflow server` over the embedded store, in its own process group.

    Args:
        settings: The service's settings (the embedded store's URI).
        port: The port it serves on.

    Returns:
        Its process, or None where a tracking server is configured (its own UI
        serves).
    """
    if settings.mlflow_tracking_uri:
        return None  # a tracking server is configured: its own UI serves
    return subprocess.Popen(
        [
            str(Path(sys.executable).with_name("mlflow")),
            "server",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--backend-store-uri",
            settings.tracking_uri,
            "--default-artifact-root",
            settings.artifact_root,
            # one worker: four (MLflow's default) start slowly and die under load on a
            # small machine; one serves the UI of one person's sweeps well
            "--workers",
            "1",
        ],
        start_new_session=True,
    )


def wait_for_mlflow_ui(proc: subprocess.Popen, port: int, timeout_s: float = 300) -> bool:
    """Waits until the MLflow UI answers /health while its process lives (else a warning).

    On two busy cores its start took over two minutes.

    Args:
        proc: Its process.
        port: The port it serves on.
        timeout_s: How long to wait at most.

    Returns:
        Whether it answers.
    """
    import httpx

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    log.warning("the MLflow UI on port %s is not answering yet", port)
    return False


def stop_process_group(proc: subprocess.Popen, timeout_s: float = 20) -> None:
    """SIGTERM a process group we started, SIGKILL it if it lingers.

    Args:
        proc: The group's leader.
        timeout_s: How long it may linger.
    """
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    except ProcessLookupError:
        pass
