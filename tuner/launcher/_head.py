"""The embedded one-node Ray head the service starts when no cluster is configured.

It runs `ray start --head --block` in its own process group and is remembered in
`<data_dir>/ray-head.json`, so a restarted API server follows the jobs of the head it
started before instead of starting a second one. Only the process that started the
head stops it.
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

from tuner.launcher._jobs import auth_token, token_auth_on
from tuner.settings import Settings

log = logging.getLogger("tuner.launcher")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def distinct_free_ports(n: int) -> list[int]:
    """`n` free ports, no two the same: each is picked free and released at once, so the
    OS can hand the same one out twice (a full suite run gave Ray's GCS and dashboard one
    port, and `ray start` refused it)."""
    ports: list[int] = []
    while len(ports) < n:
        port = _free_port()
        if port not in ports:
            ports.append(port)
    return ports


# what `ray start` logs when a port it was given is taken (by another process, or given
# to two of its own components): the head is then started again on fresh ports
_PORT_CONFLICTS = ("already in use", "already occupied", "used by other components")


def port_conflict(log_tail: str) -> bool:
    """Whether a head's log says it exited over a port."""
    return any(marker in log_tail.lower() for marker in _PORT_CONFLICTS)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def dashboard_up(url: str) -> bool:
    """Whether a Ray dashboard answers at `url`."""
    try:
        return httpx.get(f"{url}/api/version", timeout=2).status_code < 500
    except httpx.HTTPError:
        return False


def ensure_auth_token() -> None:
    """With token authentication on, a token for the head: `ray start` refuses to start
    without one (it never makes one, unlike `ray.init()`), which is the case on a fresh
    machine. Ray's own public command makes it (~/.ray/auth_token, readable by its owner
    only); it prints the token, which is kept out of every log."""
    if not token_auth_on() or auth_token():
        return
    ray_cli = str(Path(sys.executable).with_name("ray"))
    done = subprocess.run(
        [ray_cli, "get-auth-token", "--generate"], capture_output=True, text=True, timeout=60
    )
    made = Path.home() / ".ray" / "auth_token"
    if made.exists():
        made.chmod(0o600)
    if done.returncode != 0 or not auth_token():
        raise RuntimeError(
            "token authentication is on (RAY_AUTH_MODE=token) and no Ray token was found; "
            f"`ray get-auth-token --generate` failed with code {done.returncode}: "
            f"{done.stderr.strip()[-500:]}"
        )
    log.info("made a Ray authentication token for the embedded head (~/.ray/auth_token)")


def _tail(path: Path, lines: int = 15) -> str:
    """The last lines of a log file ("" when there is none)."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


class EmbeddedHead:
    """Starts, reuses and stops the service's own Ray head.

    Args:
        settings: The service's settings (its data dir holds the head's record).
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.head_file = settings.data_path / "ray-head.json"
        self.process: subprocess.Popen | None = None

    @property
    def temp_dir(self) -> str:
        """The head's Ray temp dir: short and one per data dir.

        Short: Ray's socket paths must stay under 108 bytes.
        """
        digest = hashlib.sha1(str(self.settings.data_path).encode()).hexdigest()[:12]
        # /tmp as Ray itself uses: macOS's per-user temp dir is too long a prefix
        base = Path("/tmp") if Path("/tmp").is_dir() else Path(tempfile.gettempdir())
        return str(base / f"tuner-ray-{os.getuid()}-{digest}")

    @property
    def started(self) -> bool:
        """Whether this process started the head (and so stops it)."""
        return self.process is not None

    def alive(self) -> bool:
        """Whether the head this service uses still runs.

        The process it started, or the recorded pid of one a previous server started (no
        request to its dashboard).

        Returns:
            True while it runs.
        """
        if self.process is not None:
            return self.process.poll() is None
        try:
            return _pid_alive(int(json.loads(self.head_file.read_text())["pid"]))
        except (OSError, ValueError, KeyError):
            return False

    def known(self) -> str | None:
        """The dashboard URL of a head a previous server started and that still runs.

        Returns:
            Its URL, or None.
        """
        if not self.head_file.exists():
            return None
        try:
            info: dict[str, Any] = json.loads(self.head_file.read_text())
        except (OSError, ValueError):
            return None
        if _pid_alive(int(info["pid"])) and dashboard_up(info["address"]):
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

    def start(self, num_cpus: int | None, deadline: float, attempts: int = 3) -> str:
        """Starts a head; returns its dashboard URL once the dashboard answers.

        Its ports are picked free and released before Ray binds them, so another
        process on the host (another Ray's outgoing connections use the same ephemeral
        range) can take one in between; Ray then exits ("already in use"), and the head
        is started again on fresh ports, up to `attempts` times before `deadline`. A head
        that exits for another reason is an error at once.

        Args:
            num_cpus: The CPUs the head offers (default: Ray's count).
            deadline: The time.monotonic() by which the dashboard must answer.
            attempts: How many times to start it on fresh ports.

        Returns:
            The dashboard's URL.
        """
        logpath = self.settings.data_path / "ray-head.log"
        ensure_auth_token()
        attempt = 0
        while True:
            attempt += 1
            url, exit_code = self._start_once(num_cpus, deadline, logpath)
            if url is not None:
                return url
            tail = _tail(logpath)
            if exit_code is None:
                raise RuntimeError(
                    f"the embedded Ray head did not answer before its deadline; "
                    f"see {logpath}:\n{tail}"
                )
            if not port_conflict(tail) or attempt >= attempts or time.monotonic() > deadline:
                raise RuntimeError(
                    f"the embedded Ray head exited with code {exit_code} "
                    f"({attempt} attempts); see {logpath}:\n{tail}"
                )
            log.warning(
                "the embedded Ray head exited with code %s (attempt %d of %d); starting it "
                "again on fresh ports. Its log ends:\n%s",
                exit_code,
                attempt,
                attempts,
                tail,
            )

    def _start_once(
        self, num_cpus: int | None, deadline: float, logpath: Path
    ) -> tuple[str | None, int | None]:
        """One `ray start`: (dashboard URL, None) once it answers, (None, exit code) if
        it exited, (None, None) if the deadline passed (the head is stopped then)."""
        port, dash, agent = distinct_free_ports(3)
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
            f"--dashboard-agent-listen-port={agent}",
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
        env = {**os.environ, "RAY_AUTH_MODE": os.environ.get("RAY_AUTH_MODE", "token")}
        # Secrets reach sweep drivers through the head's environment, never a job's
        # runtime_env (which the dashboard shows): see Launcher.job_env.
        env["TUNER_DATABASE_URL"] = self.settings.store_url
        env.pop("TUNER_API_TOKEN", None)  # drivers never need it
        with logpath.open("ab") as logfile:  # the child keeps its own descriptor
            self.process = subprocess.Popen(
                cmd, stdout=logfile, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        url = f"http://127.0.0.1:{dash}"
        while not dashboard_up(url):
            exit_code = self.process.poll()
            if exit_code is not None or time.monotonic() > deadline:
                self.stop()
                return None, exit_code
            time.sleep(0.5)
        self.head_file.write_text(
            json.dumps(
                {
                    "pid": self.process.pid,
                    "address": url,
                    "gcs": f"127.0.0.1:{port}",
                    "temp_dir": self.temp_dir,
                }
            )
        )
        return url, None

    def stop(self, timeout_s: float = 10) -> None:
        """Stops the head if this process started it (its own process group).

        Args:
            timeout_s: How long to wait for it to exit before killing it.
        """
        if self.process is None:
            return
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        except ProcessLookupError:
            pass
        self.process = None
        self.head_file.unlink(missing_ok=True)
