"""The local Ray of `tuner run`: no idle workers nobody uses, every process stopped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

SCRIPT = """
import json, os
from pathlib import Path

import ray
from tuner.launcher._local import _is_autoscaler_monitor, _own_children, ensure_ray, stop_local_ray


def descendants(root):
    children = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        kids = children.get(todo.pop(), [])
        found += kids
        todo += kids
    return found


def argv(pid):
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split(chr(0))


ensure_ray(num_cpus=2)
at_start = {p: argv(p) for p in descendants(os.getpid())}


@ray.remote
def pid():
    return os.getpid()


task_pid = ray.get(pid.remote())
procs = {p: argv(p) for p in descendants(os.getpid())}
found = _own_children(_is_autoscaler_monitor)  # what stop_local_ray kills first
stop_local_ray()
print(json.dumps({"at_start": at_start, "procs": procs, "task_pid": task_pid, "found": found,
                  "up": ray.is_initialized()}))
"""


def alive(pid: int) -> bool:
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def test_local_ray_starts_no_idle_workers_and_stops_every_process(tmp_path):
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_USAGE_STATS_ENABLED": "0"}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=tmp_path,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["up"] is False
    procs = {int(pid): argv for pid, argv in out["procs"].items()}

    def running(script: str) -> list[int]:
        return [p for p, argv in procs.items() if any(a.endswith(script) for a in argv)]

    # the autoscaler monitor was running (stop_local_ray kills it before Ray's shutdown)
    assert out["found"] == running("autoscaler/_private/monitor.py") != []
    assert len(out["found"]) == 1

    # Ray prestarted no idle workers when it started (Tune's trial actors cannot use
    # them: their runtime_env differs); a worker is default_worker.py, then ray::IDLE
    def is_worker(argv: list[str]) -> bool:
        return argv[0] == "ray::IDLE" or any(a.endswith("default_worker.py") for a in argv)

    assert [argv[:3] for argv in out["at_start"].values() if is_worker(argv)] == []
    assert out["task_pid"] in procs  # then Ray starts one for a task, as it should
    # every process has exited: Ray's shutdown signals them and returns; under load a
    # worker may take some seconds to finish exiting, never longer than this
    deadline = time.monotonic() + 30
    while [p for p in procs if alive(p)] and time.monotonic() < deadline:
        time.sleep(0.2)
    assert {p: procs[p][:3] for p in procs if alive(p)} == {}
