"""Shared pieces of the benchmarks: the one tiny sweep, timing, tables, the service.

Every benchmark measures its arms side by side in one run and reports a RATIO;
absolute times are printed for information only (they depend on the machine and
on whatever else runs on it).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent

# The one sweep every benchmark runs: PPO on CartPole, a grid of two learning rates
# (two trials, both at once), a few small iterations, sampling in the trial's own
# process. _plain_tune.py builds the same sweep by hand from these constants.
ITERATIONS = 8
BATCH = 500
MINIBATCH = 128
EPOCHS = 2
HIDDENS = [32, 32]
LRS = [1e-4, 1e-3]
SEED = 0


def tiny_spec(name: str, iterations: int = ITERATIONS) -> dict[str, Any]:
    """The benchmark sweep as a tuner spec (REST body / parse_spec input)."""
    return {
        "name": name,
        "algorithm": "PPO",
        "env": "CartPole-v1",
        "config": {
            "train_batch_size_per_learner": BATCH,
            "minibatch_size": MINIBATCH,
            "num_epochs": EPOCHS,
        },
        "model": {"fcnet_hiddens": HIDDENS},
        "search": {"method": "grid", "space": {"lr": {"grid": LRS}}},
        "stop": {"training_iteration": iterations},
        "resources": {"num_env_runners": 0},
        "max_concurrent_trials": 2,
        # the default: one checkpoint per trial at its end (plain Tune does the same)
        "checkpoint": {"frequency": 0, "at_end": True, "num_to_keep": 2},
        "seed": SEED,
    }


def force_new_local_ray() -> None:
    """Makes a bare `ray.init()` in this process (and its children) start a new local Ray.

    `ray start` (the service's embedded head, ours or anyone's on this machine)
    writes /tmp/ray/ray_current_cluster and never removes it when the head is
    killed; a bare `ray.init()` then connects to that head instead of starting
    one, and `ray.init(num_cpus=2)` raises. RAY_ADDRESS=local opts out.
    """
    if not os.environ.get("RAY_ADDRESS"):
        os.environ["RAY_ADDRESS"] = "local"


# -- timing and tables --------------------------------------------------------------


def mean(values: list[float]) -> float:
    return statistics.fmean(values) if values else float("nan")


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0..100), nearest-rank on the sorted values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def table(headers: list[str], rows: list[list[Any]]) -> str:
    """A plain-text table with right-aligned columns."""

    def cell(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:,.3f}" if abs(v) < 10 else f"{v:,.1f}"
        if isinstance(v, int):
            return f"{v:,}"
        return str(v)

    cells = [[cell(v) for v in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(headers, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join(lines)


def ratio_line(name: str, value: float, goal: str) -> str:
    return f"RATIO {name}={value:.2f} (goal {goal})"


def parse_time(text: str | None) -> datetime | None:
    """An ISO timestamp of the API (may end in Z)."""
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


# -- the service --------------------------------------------------------------------


def server_class() -> Any:
    """tests/e2e/conftest.py's Server: `tuner serve` in its own process group."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from tests.e2e.conftest import Server

    return Server


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def _http_ok(url: str) -> bool:
    import httpx

    try:
        return httpx.get(url, timeout=2).status_code < 500
    except httpx.HTTPError:
        return False


def prestart_head(data_dir: Path, num_cpus: int = 2, timeout: float = 120) -> float:
    """Starts the Ray head `tuner serve` would start, and records it for the server.

    Same command as tuner.launcher (`ray start --head --block`, own process group,
    token auth) with one change: a free dashboard-agent port instead of Ray's fixed
    52365. Every Ray node's agent takes 52365 for job submissions unless told
    otherwise; while another Ray on this machine holds it, a head started with the
    default has no job agent and every submit fails ("No available agent to submit
    job"). The server adopts this head through <data_dir>/ray-head.json, exactly as
    a restarted server adopts the head it started before; Server.stop_head() stops
    it by that recorded pid. Returns the seconds until the job agent listened.
    """
    data_dir.mkdir(parents=True, exist_ok=True)
    port, dash, agent = free_port(), free_port(), free_port()
    cmd = [
        str(Path(sys.executable).with_name("ray")),
        "start",
        "--head",
        "--block",
        f"--port={port}",
        "--dashboard-host=127.0.0.1",
        f"--dashboard-port={dash}",
        f"--dashboard-agent-listen-port={agent}",
        "--include-dashboard=true",
        "--disable-usage-stats",
        f"--num-cpus={num_cpus}",
    ]
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env["RAY_AUTH_MODE"] = os.environ.get("RAY_AUTH_MODE", "token")
    t0 = time.perf_counter()
    with (data_dir / "ray-head.log").open("ab") as log:
        head = subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    url = f"http://127.0.0.1:{dash}"
    (data_dir / "ray-head.json").write_text(
        json.dumps({"pid": head.pid, "address": url, "gcs": f"127.0.0.1:{port}"})
    )
    deadline = time.monotonic() + timeout
    while not (_http_ok(f"{url}/api/version") and port_open(agent)):
        if head.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the Ray head did not start; see {data_dir / 'ray-head.log'}")
        time.sleep(0.5)
    return time.perf_counter() - t0


def start_server(data_dir: Path) -> tuple[Any, float]:
    """Starts a Ray head (prestart_head) and `tuner serve` on it, on free ports;
    returns the server and the seconds until it answered /healthz."""
    t0 = time.perf_counter()
    server = server_class()(data_dir)
    if server.env.get("RAY_ADDRESS") == "local":  # a benchmark's own opt-out, not the server's
        del server.env["RAY_ADDRESS"]
    try:
        prestart_head(data_dir, num_cpus=int(server.env.get("TUNER_EMBEDDED_NUM_CPUS", "2")))
        server.start(timeout=180)
    except BaseException:
        stop_server(server)
        raise
    return server, time.perf_counter() - t0


def stop_server(server: Any) -> None:
    """Stops the server's process group and the Ray head it started (by recorded pid)."""
    if server is None:
        return
    try:
        server.stop()
    finally:
        server.stop_head()


TERMINAL = {"SUCCEEDED", "STOPPED", "FAILED"}


def run_service_sweep(
    client: Any, spec: dict[str, Any], timeout: float = 300, interval: float = 0.25
) -> dict[str, Any]:
    """POSTs a spec and polls GET /experiments/{id} every `interval` s until it ends.

    Returns {id, status, wall_s (POST to terminal), sweep_s (started_at to
    finished_at), queue_s (created_at to started_at), env_steps (sum over trials),
    trials, error}."""
    t0 = time.perf_counter()
    resp = client.post("/experiments", json=spec)
    resp.raise_for_status()
    exp_id = resp.json()["id"]
    deadline = t0 + timeout
    view: dict[str, Any] = {}
    while time.perf_counter() < deadline:
        view = client.get(f"/experiments/{exp_id}").json()
        if view.get("status") in TERMINAL:
            break
        time.sleep(interval)
    wall = time.perf_counter() - t0
    if view.get("status") not in TERMINAL:
        client.post(f"/experiments/{exp_id}/stop")
        raise TimeoutError(f"sweep {exp_id} still {view.get('status')} after {timeout:.0f} s")
    return sweep_outcome(client, view, wall)


def sweep_outcome(client: Any, view: dict[str, Any], wall: float) -> dict[str, Any]:
    """The outcome of a finished sweep from its view and its trials."""
    trials = client.get(f"/experiments/{view['id']}/trials").json()["items"]
    created = parse_time(view.get("created_at"))
    started, finished = parse_time(view.get("started_at")), parse_time(view.get("finished_at"))
    sweep_s = (finished - started).total_seconds() if started and finished else float("nan")
    queue_s = (started - created).total_seconds() if created and started else float("nan")
    return {
        "id": view["id"],
        "status": view["status"],
        "wall_s": wall,
        "sweep_s": sweep_s,
        "queue_s": queue_s,
        "env_steps": sum(int(t.get("env_steps") or 0) for t in trials),
        "trials": len(trials),
        "error": view.get("error"),
    }


# -- subprocesses -------------------------------------------------------------------


def run_timed(cmd: list[str], env: dict[str, str], log: Path, timeout: float) -> tuple[int, float]:
    """Runs cmd in its own process group; returns (exit code, wall seconds from
    process start to end). On timeout the whole group is killed."""
    with log.open("ab") as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            rc = -9
        wall = time.perf_counter() - t0
    # a driver that exited may leave Ray processes of its own session behind
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    return rc, wall


def last_json_line(log: Path, prefix: str) -> dict[str, Any]:
    """The JSON after `prefix` on the last line of a log that has it ({} if none)."""
    found: dict[str, Any] = {}
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith(prefix):
            try:
                found = json.loads(line[len(prefix) :])
            except ValueError:
                pass
    return found
