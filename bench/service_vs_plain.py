"""One sweep through the service vs. the same sweep as a plain Ray Tune script.

Arms, run side by side in the order P S S P (twice by default, --repeats):

  P  plain: `python bench/_plain_tune.py` (RLlib PPOConfig + tune.Tuner("PPO", ...),
     hand-wired) in a fresh process. Timed from process start to process end:
     Python and Ray imports, starting a local 2-CPU Ray, the fit, Ray shutdown.
  S  service: `tuner serve` (started once, before timing, with its embedded 2-CPU
     Ray head) gets the same sweep as a POST /experiments. Timed from the POST to
     the first GET /experiments/{id} that reads SUCCEEDED (polled every 0.25 s):
     validation, the queue, the supervisor's tick (0.5 s), the Ray Job submit, the
     driver process (imports, connecting to the running head), the fit with the
     store and MLflow callbacks, MLflow's sweep result, the store's final writes.
     The sweep's own started_at -> finished_at (claimed by the supervisor -> outcome
     written by the driver) is shown too.

    RATIO service_vs_plain = mean wall(S) / mean wall(P)     (goal <= 1.05)

The service keeps a Ray head up between sweeps, so its wall time has no Ray
start-up; the plain script pays a local Ray start-up every run (what a user's
script does). The ratio compares what each user waits for one sweep.

    .venv/bin/python bench/service_vs_plain.py [--iterations 8] [--repeats 2]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import httpx
from _common import (
    BENCH,
    ITERATIONS,
    last_json_line,
    mean,
    ratio_line,
    run_service_sweep,
    run_timed,
    start_server,
    stop_server,
    table,
    tiny_spec,
)


def run_plain(tmp: Path, i: int, iterations: int) -> dict:
    log = tmp / f"plain-{i}.log"
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    env["BENCH_T0"] = repr(time.time())
    cmd = [
        sys.executable,
        str(BENCH / "_plain_tune.py"),
        "--storage",
        str(tmp / f"plain-{i}"),
        "--iterations",
        str(iterations),
    ]
    rc, wall = run_timed(cmd, env, log, timeout=300)
    out = last_json_line(log, "PLAIN_RESULT ")
    if rc != 0 or not out:
        print(f"plain run {i} failed (rc {rc}); log tail:\n{log.read_text()[-2000:]}")
    return {
        "status": "OK" if rc == 0 and out and not out.get("errors") else f"rc={rc}",
        "wall_s": wall,
        "inner_s": out.get("fit_s", float("nan")),
        "env_steps": out.get("env_steps", 0),
        "note": f"imports {out.get('imports_s', float('nan')):.1f} s, "
        f"ray.init {out.get('ray_init_s', float('nan')):.1f} s",
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=ITERATIONS)
    parser.add_argument("--repeats", type=int, default=2, help="P S S P blocks (default 2)")
    parser.add_argument("--keep", action="store_true", help="keep the temp data dir")
    args = parser.parse_args(argv)

    tmp = Path(tempfile.mkdtemp(prefix="tuner-bench-service-"))
    server = None
    try:
        server, up_s = start_server(tmp / "service")
        print(f"service + embedded Ray head up in {up_s:.1f} s (not timed); data in {tmp}")
        client = httpx.Client(base_url=f"{server.url}/api/v1", timeout=30)
        order = ["plain", "service", "service", "plain"] * args.repeats
        rows = []
        walls: dict[str, list[float]] = {"plain": [], "service": []}
        inner: dict[str, list[float]] = {"plain": [], "service": []}
        for i, arm in enumerate(order):
            if arm == "plain":
                res = run_plain(tmp, i, args.iterations)
            else:
                out = run_service_sweep(client, tiny_spec(f"bench-service-{i}", args.iterations))
                note = f"queued {out['queue_s']:.1f} s"
                res = {**out, "inner_s": out["sweep_s"], "note": note}
                if out["status"] != "SUCCEEDED":
                    print(f"service sweep {out['id']} {out['status']}: {out['error']}")
            if res["status"] in {"OK", "SUCCEEDED"}:  # a failed run's time would mean nothing
                walls[arm].append(res["wall_s"])
                inner[arm].append(res["inner_s"])
            rows.append(
                [
                    i + 1,
                    arm,
                    res["status"],
                    res["env_steps"],
                    res["wall_s"],
                    res["inner_s"],
                    res["note"],
                ]
            )
            print(f"  run {i + 1}/{len(order)} {arm}: {res['wall_s']:.1f} s", flush=True)
        client.close()

        print()
        print(table(["run", "arm", "status", "env steps", "wall s", "inner s", "note"], rows))
        print()
        print("wall s   plain: process start -> end (imports, local Ray start, fit, shutdown)")
        print("         service: POST /experiments -> GET reads SUCCEEDED (queue, Ray Job,")
        print("         driver process start, fit + store + MLflow callbacks, MLflow result,")
        print("         final store writes); the server and its Ray head were already up")
        print("inner s  plain: Tuner.fit() only")
        print("         service: the sweep's started_at -> finished_at (driver start included)")
        print()
        print(
            table(
                ["arm", "runs ok", "mean wall s", "mean inner s"],
                [
                    [arm, len(walls[arm]), mean(walls[arm]), mean(inner[arm])]
                    for arm in ("plain", "service")
                ],
            )
        )
        print()
        inner_ratio = mean(inner["service"]) / mean(inner["plain"])
        print(
            f"info: inner ratio service/plain = {inner_ratio:.2f} (not like for like: the "
            "service's includes its driver's start, the plain one only Tuner.fit())"
        )
        print(
            ratio_line("service_vs_plain", mean(walls["service"]) / mean(walls["plain"]), "<= 1.05")
        )
    finally:
        t0 = time.perf_counter()
        stop_server(server)
        if server is not None:
            print(f"(server and its Ray head stopped in {time.perf_counter() - t0:.1f} s)")
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
