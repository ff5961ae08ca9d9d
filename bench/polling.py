"""API latency under 50 concurrent pollers, and what the pollers cost the training.

Starts the service (`tuner serve` with its embedded 2-CPU Ray head) and runs
the same tiny sweep in the order Q L L Q (repeated with --repeats):

  Q  quiet: no pollers; only the benchmark's own GET /experiments/{id} every 0.25 s.
  L  loaded: 50 concurrent pollers from POST until the sweep ends. Each poller
     (its own connection of one shared client, like a browser tab) loops:
     GET /experiments/{id}, then GET /experiments/{id}/trials, then waits
     --interval s (default 2 s, the web page's own rate; --interval 0.1 is a
     stress at 20x that). The pollers' phases are spread evenly over one interval (tabs opened
     at different moments, not in lockstep). Each loop is bounded in count
     (--max-rounds) and time (the sweep's end, or the sweep timeout).

Latency is client-side (request sent -> response read), so it includes this
process's own event loop, which shares the 2 cores with the server and training.
Prints p50/p95/p99 per route (goal p99 < 20 ms, issue #12) and each sweep's training
throughput = total env steps / (finished_at - started_at), then

    RATIO polled_throughput = mean throughput(L) / mean throughput(Q)  (goal >= 0.95)

    .venv/bin/python bench/polling.py [--pollers 50] [--interval 2] [--repeats 1]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import httpx
from _common import (
    ITERATIONS,
    TERMINAL,
    mean,
    percentile,
    ratio_line,
    start_server,
    stop_server,
    sweep_outcome,
    table,
    tiny_spec,
)

ROUTES = ("experiment", "trials")


async def wait_or_done(done: asyncio.Event, seconds: float) -> None:
    try:
        await asyncio.wait_for(done.wait(), timeout=seconds)
    except TimeoutError:
        pass


async def poller(
    client: httpx.AsyncClient,
    exp_id: str,
    done: asyncio.Event,
    interval: float,
    max_rounds: int,
    lat: dict,
    phase: float,
) -> None:
    """After `phase` s: GET /experiments/{id} then /trials, wait `interval` s, repeat;
    latencies (s) into lat."""
    paths = {"experiment": f"/experiments/{exp_id}", "trials": f"/experiments/{exp_id}/trials"}
    await wait_or_done(done, phase)
    for _ in range(max_rounds):
        if done.is_set():
            return
        for route in ROUTES:
            t0 = time.perf_counter()
            try:
                resp = await client.get(paths[route])
                await resp.aread()
                ok = resp.status_code == 200
            except httpx.HTTPError:
                ok = False
            if ok:
                lat[route].append(time.perf_counter() - t0)
            else:
                lat["errors"].append(route)
        await wait_or_done(done, interval)


def cpu_seconds(pid: int | None = None) -> float:
    """CPU seconds (user + system) used so far by this process, or by process `pid`
    (Linux /proc; nan where unreadable)."""
    if pid is None:
        t = os.times()
        return t.user + t.system
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return float("nan")


def n_requests(out: dict) -> int:
    return sum(len(out["latency"][r]) for r in ROUTES)


def trial_rate(client: httpx.Client, exp_id: str) -> float:
    """Sum over trials of env steps / time_total_s at their last iteration: the
    training rate inside the trainables, without the driver's start and end."""
    total = 0.0
    for trial in client.get(f"/experiments/{exp_id}/trials").json()["items"]:
        points = client.get(f"/experiments/{exp_id}/trials/{trial['trial_id']}/metrics")
        last = (points.json().get("points") or [None])[-1]
        if last and last["time_s"] > 0:
            total += last["env_steps"] / last["time_s"]
    return total


async def one_sweep(base: str, name: str, iterations: int, args: argparse.Namespace) -> dict:
    """Runs one sweep through the service, with args.pollers pollers (0: none)."""
    lat: dict[str, list] = {"experiment": [], "trials": [], "errors": []}
    done = asyncio.Event()
    # One client with a connection per poller: a client per poller would spend its own
    # set-up CPU (an SSL context each) in the event loop that times everyone else.
    limits = httpx.Limits(max_connections=args.pollers + 1, max_keepalive_connections=None)
    async with httpx.AsyncClient(base_url=base, timeout=30, limits=limits) as client:
        t0 = time.perf_counter()
        resp = await client.post("/experiments", json=tiny_spec(name, iterations))
        resp.raise_for_status()
        exp_id = resp.json()["id"]
        # spread evenly over one interval, like browser tabs opened at different times
        tasks = [
            asyncio.create_task(
                poller(
                    client,
                    exp_id,
                    done,
                    args.interval,
                    args.max_rounds,
                    lat,
                    phase=k * args.interval / max(args.pollers, 1),
                )
            )
            for k in range(args.pollers)
        ]
        deadline = t0 + args.timeout
        view: dict = {}
        try:
            while time.perf_counter() < deadline:
                view = (await client.get(f"/experiments/{exp_id}")).json()
                if view.get("status") in TERMINAL:
                    break
                await asyncio.sleep(0.25)
        finally:
            done.set()
            await asyncio.gather(*tasks, return_exceptions=True)
        wall = time.perf_counter() - t0
        if view.get("status") not in TERMINAL:
            await client.post(f"/experiments/{exp_id}/stop")
            raise TimeoutError(f"sweep {exp_id} still {view.get('status')} after {args.timeout} s")
    with httpx.Client(base_url=base, timeout=30) as sync_client:
        out = sweep_outcome(sync_client, view, wall)
        out["trial_rate"] = trial_rate(sync_client, exp_id)
    out["throughput"] = out["env_steps"] / out["sweep_s"] if out["sweep_s"] > 0 else float("nan")
    out["latency"] = lat
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=ITERATIONS)
    parser.add_argument("--pollers", type=int, default=50)
    parser.add_argument("--interval", type=float, default=2.0, help="s between a poller's rounds")
    parser.add_argument("--max-rounds", type=int, default=5000, help="rounds per poller, at most")
    parser.add_argument("--timeout", type=float, default=300, help="s per sweep, at most")
    parser.add_argument("--repeats", type=int, default=1, help="Q L L Q blocks (default 1)")
    parser.add_argument("--keep", action="store_true", help="keep the temp data dir")
    args = parser.parse_args(argv)

    tmp = Path(tempfile.mkdtemp(prefix="tuner-bench-polling-"))
    server = None
    try:
        server, up_s = start_server(tmp / "service")
        base = f"{server.url}/api/v1"
        print(f"service + embedded Ray head up in {up_s:.1f} s (not timed); data in {tmp}")
        order = ["quiet", "loaded", "loaded", "quiet"] * args.repeats
        rows = []
        rates: dict[str, list[float]] = {"quiet": [], "loaded": []}
        trial_rates: dict[str, list[float]] = {"quiet": [], "loaded": []}
        cpu_per_req: list[tuple[float, float, int]] = []
        lat: dict[str, list] = {"experiment": [], "trials": [], "errors": []}
        for i, arm in enumerate(order):
            run_args = argparse.Namespace(**{**vars(args), "pollers": 0})
            if arm == "loaded":
                run_args.pollers = args.pollers
            cpu0, srv0 = cpu_seconds(), cpu_seconds(server.proc.pid)
            out = asyncio.run(one_sweep(base, f"bench-polling-{i}", args.iterations, run_args))
            cpu_here, cpu_srv = cpu_seconds() - cpu0, cpu_seconds(server.proc.pid) - srv0
            if arm == "loaded":
                cpu_per_req.append((cpu_srv, cpu_here, n_requests(out)))
            if out["status"] != "SUCCEEDED":
                print(f"sweep {out['id']} {out['status']}: {out['error']}")
            if out["status"] == "SUCCEEDED":  # a failed sweep's rate would mean nothing
                rates[arm].append(out["throughput"])
                trial_rates[arm].append(out["trial_rate"])
            n_req = n_requests(out)
            for key in lat:
                lat[key] += out["latency"][key]
            rows.append(
                [
                    i + 1,
                    arm,
                    out["status"],
                    out["env_steps"],
                    out["sweep_s"],
                    out["throughput"],
                    out["trial_rate"],
                    n_req,
                    n_req / out["wall_s"],
                    cpu_here,
                    cpu_srv,
                    out["wall_s"],
                ]
            )
            print(f"  run {i + 1}/{len(order)} {arm}: {out['wall_s']:.1f} s", flush=True)

        print()
        print(
            table(
                [
                    "run",
                    "arm",
                    "status",
                    "env steps",
                    "sweep s",
                    "env steps/s",
                    "in trials",
                    "requests",
                    "req/s",
                    "CPU s bench",
                    "CPU s API",
                    "wall s",
                ],
                rows,
            )
        )
        print(
            "CPU s bench = this process (the pollers' client side); CPU s API = the "
            "`tuner serve` process;\nwall s = POST -> SUCCEEDED seen. Both share the 2 cores "
            "with the sweep's trials."
        )
        print()
        lat_rows = [
            [
                f"GET /experiments/{{id}}{'' if route == 'experiment' else '/trials'}",
                len(lat[route]),
                percentile(lat[route], 50) * 1000,
                percentile(lat[route], 95) * 1000,
                percentile(lat[route], 99) * 1000,
                max(lat[route], default=float("nan")) * 1000,
            ]
            for route in ROUTES
        ]
        print(
            f"latency under {args.pollers} pollers "
            f"({args.interval:g} s between a poller's rounds), client side:"
        )
        print(table(["route", "requests", "p50 ms", "p95 ms", "p99 ms", "max ms"], lat_rows))
        print(f"failed requests: {len(lat['errors'])}")
        reqs = sum(n for _, _, n in cpu_per_req)
        if reqs:
            api_ms = 1000 * sum(c for c, _, _ in cpu_per_req) / reqs
            client_ms = 1000 * sum(c for _, c, _ in cpu_per_req) / reqs
            print(f"CPU per request: API {api_ms:.2f} ms, pollers' client {client_ms:.2f} ms")
        print("(means below count SUCCEEDED sweeps only)")
        print()
        print(
            table(
                ["arm", "runs ok", "mean env steps/s", "mean in trials"],
                [
                    [arm, len(rates[arm]), mean(rates[arm]), mean(trial_rates[arm])]
                    for arm in ("quiet", "loaded")
                ],
            )
        )
        print("env steps/s = total env steps / (finished_at - started_at) of the sweep;")
        print("in trials = sum over trials of env steps / time_total_s (training only)")
        in_ratio = mean(trial_rates["loaded"]) / mean(trial_rates["quiet"])
        print(f"info: in-trials throughput ratio loaded/quiet = {in_ratio:.2f}")
        p99 = max(percentile(lat[r], 99) for r in ROUTES) * 1000
        print(f"RESULT p99_ms={p99:.1f} (goal < 20; the slower route)")
        print(
            ratio_line("polled_throughput", mean(rates["loaded"]) / mean(rates["quiet"]), ">= 0.95")
        )
    finally:
        stop_server(server)
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
