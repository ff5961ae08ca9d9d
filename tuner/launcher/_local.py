"""The Ray a sweep's driver process runs on: a local Ray of its own, or the cluster it
is given (`tuner run` starts it while RLlib is imported on a thread)."""

from __future__ import annotations

import atexit
import logging
import os
import signal
from collections.abc import Callable
from pathlib import Path

from tuner.errors import TunerError
from tuner.ray_internals import no_prestarted_workers

logger = logging.getLogger(__name__)


def ensure_ray(address: str | None = None, num_cpus: int | None = None) -> None:
    """Connects to `address`, or starts a local Ray, unless Ray is already up.

    The working directory joins workers' PYTHONPATH so that envs named by import
    path ('mypkg.envs:MyEnv') import in every trial process. Call it from the main
    thread: Ray's processes end with the thread that started them (PR_SET_PDEATHSIG).

    Args:
        address: A cluster's address (None: a local Ray, started here).
        num_cpus: The CPUs a local Ray offers (default: Ray's count).
    """
    import ray

    if ray.is_initialized():
        return
    paths = [os.getcwd(), *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    if address == "auto":  # a Ray Job's driver: the job's runtime_env already has PYTHONPATH
        ray.init(address=address, log_to_driver=False)
    elif address:
        ray.init(
            address=address,
            log_to_driver=False,
            runtime_env={"env_vars": {"PYTHONPATH": os.environ["PYTHONPATH"]}},
        )
    else:
        # "local": a new Ray of our own, even if another (say, a tuner serve head) runs here
        _start_local_ray(num_cpus)
        atexit.register(stop_local_ray)  # runs before Ray's own exit hook (registered earlier)


# Ray gives a new local node 30 s to register with its GCS, then gives up; on a host
# whose cores are all busy that can pass. A start that timed out is tried again.
STARTUP_TIMED_OUT = "timed out during startup"
LOCAL_STARTS = 3


class RayStartError(TunerError, RuntimeError):
    """The local Ray did not start: its cause, in one line, for the user."""


def _start_local_ray(num_cpus: int | None) -> None:
    """A local Ray of our own, tried up to LOCAL_STARTS times when its node times out
    registering (any other failure is raised at once).

    Raises:
        RayStartError: The start failed: its message names the cause and the tries.
    """
    import ray

    for attempt in range(1, LOCAL_STARTS + 1):
        try:
            ray.init(
                address="local",
                num_cpus=num_cpus,
                include_dashboard=False,
                log_to_driver=False,
                **no_prestarted_workers(),
            )
            return
        except Exception as err:
            timed_out = STARTUP_TIMED_OUT in str(err)
            if not timed_out or attempt == LOCAL_STARTS:
                ray.shutdown()  # what a half-done start left running
                raise RayStartError(_start_failure(err, attempt, timed_out)) from err
            logger.warning(
                "the local Ray's node timed out starting (a busy host?): starting it "
                "again (%d of %d)",
                attempt + 1,
                LOCAL_STARTS,
            )
            ray.shutdown()


def _start_failure(err: Exception, tries: int, timed_out: bool) -> str:
    """What went wrong starting the local Ray, in a sentence or two."""
    cause = (str(err).strip().splitlines() or [type(err).__name__])[0]
    if timed_out:
        return (
            f"the local Ray did not start: its node timed out registering, {tries} times "
            f"(Ray: {cause!r}). The host's cores were likely all busy: try again when it "
            "is quieter. Ray's logs: the session folder under Ray's temp dir (/tmp/ray)"
        )
    return f"the local Ray did not start: {type(err).__name__}: {cause}"


def stop_local_ray() -> None:
    """Stops the local Ray `ensure_ray` started, its autoscaler monitor first.

    `ray.shutdown()` stops the GCS before the monitor, whose SIGTERM handler then
    tries to report to the stopped GCS until Ray kills it a second later: a second
    of every `tuner run`. The monitor of a single local node has nothing to save, so
    it is killed outright first: this process's own child, found in /proc (on
    systems without /proc, Ray's shutdown stops it as before).
    """
    import ray

    if not ray.is_initialized():
        return
    for pid in _own_children(_is_autoscaler_monitor):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:  # already gone
            pass
    ray.shutdown()


def _is_autoscaler_monitor(argv: list[str]) -> bool:
    """Ray's autoscaler monitor (not its log monitor): .../autoscaler/.../monitor.py."""
    return any(
        Path(arg).name == "monitor.py" and "autoscaler" in Path(arg).parts for arg in argv[1:3]
    )


def _own_children(wanted: Callable[[list[str]], bool]) -> list[int]:
    """Pids of this process's direct children whose argv `wanted` accepts (Linux)."""
    me, found = os.getpid(), []
    proc = Path("/proc")
    if not proc.is_dir():
        return found
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            if ppid != me:
                continue
            argv = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except (OSError, ValueError, IndexError):  # gone meanwhile, or not ours to read
            continue
        if wanted(argv):
            found.append(int(entry.name))
    return found
