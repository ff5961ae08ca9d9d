"""Shared pieces of the benchmarks: the one tiny sweep, timing, tables, the service.

Every benchmark measures its arms side by side in one run and reports a RATIO;
absolute times are printed for information only (they depend on the machine and
on whatever else runs on it).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
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
        # one env, as plain Tune's PPOConfig samples: the same sweep on both sides (the
        # vectorised PPO default would measure the default, not the service's cost)
        "resources": {"num_env_runners": 0, "num_envs_per_env_runner": 1},
        "max_concurrent_trials": 2,
        # the default: one checkpoint per trial at its end (plain Tune does the same)
        "checkpoint": {"frequency": 0, "at_end": True, "num_to_keep": 2},
        "seed": SEED,
    }


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


def one_trial_spec(
    name: str, algorithm: str, env: str, config: dict[str, Any], resources: dict[str, Any]
) -> dict[str, Any]:
    """The spec of one trial timed in-process ([64, 64] networks; no search)."""
    return {
        "name": name,
        "algorithm": algorithm,
        "env": env,
        "config": config,
        "model": {"fcnet_hiddens": [64, 64]},
        "resources": resources,
    }


def table(headers: list[str], rows: list[list[Any]], align: str = "right") -> str:
    """A plain-text table, columns right-aligned (or `align="left"`)."""

    def cell(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:,.3f}" if abs(v) < 10 else f"{v:,.1f}"
        if isinstance(v, int):
            return f"{v:,}"
        return str(v)

    cells = [[cell(v) for v in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    pad = str.ljust if align == "left" else str.rjust
    lines = ["  ".join(pad(h, w) for h, w in zip(headers, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(pad(c, w) for c, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join(lines)


def timed(parts: dict[str, float], name: str, fn: Any, clock: Any = time.perf_counter) -> Any:
    """fn, the seconds its calls take on `clock` added to parts[name]."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        began = clock()
        try:
            return fn(*args, **kwargs)
        finally:
            parts[name] += clock() - began

    return wrapper


def ratio_line(name: str, value: float, goal: str) -> str:
    return f"RATIO {name}={value:.2f} (goal {goal})"


def machine() -> str:
    """The CPU a figure was measured on, with torch's kernel level: a seeded run trains
    the same numbers only where the kernels are the same (docs/benchmarks.md, 12-02);
    what each trial's run records as `tuner.cpu`."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from tuner.rllib._machine import cpu_description

    return cpu_description()


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


def start_server(data_dir: Path) -> tuple[Any, float]:
    """Starts `tuner serve` (and its embedded 2-CPU Ray head) on free ports; returns
    the server and the seconds until it answered /healthz."""
    server = server_class()(data_dir)
    t0 = time.perf_counter()
    try:
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


def run_timed(
    cmd: list[str], env: dict[str, str], log: Path, timeout: float, stdout: Path | None = None
) -> tuple[int, float]:
    """Runs cmd in its own process group; returns (exit code, wall seconds from
    process start to end). Its output goes to `log` (stdout to its own file when
    `stdout` is given). On timeout the whole group is killed."""
    with contextlib.ExitStack() as files:
        out = files.enter_context(log.open("ab"))
        std = files.enter_context(stdout.open("wb")) if stdout else None
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            cmd,
            cwd=ROOT,
            env=env,
            stdout=std or out,
            stderr=out if std else subprocess.STDOUT,
            start_new_session=True,
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


def zoo_entry(algo: str, env: str) -> dict[str, Any]:
    """rl-zoo3's tuned hyperparameters for `env` (its hyperparams/<algo>.yml entry; KeyError
    where it has none). Needs rl_zoo3 (the `bench` extra)."""
    import rl_zoo3
    import yaml

    path = Path(rl_zoo3.__file__).parent / "hyperparams" / f"{algo}.yml"
    return dict(yaml.safe_load(path.read_text())[env])
