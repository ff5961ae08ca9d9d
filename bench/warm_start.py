"""Warm start: a sweep warm-started from an earlier one, with half the trials, against a
cold sweep with all of them, on the same task and budget per trial.

The story it measures: a user tuned PPO on CartPole-v1 at a small budget (the earlier
sweep: 8 trials x 15,000 env steps) and now tunes it at twice the budget. Cold: 8 trials
x 30,000 steps from nothing. Warm: 4 trials x 30,000 steps, warm-started from the
earlier sweep (its best 2 configs first, Optuna told all 8). Each sweep's best config is
confirmed on 5 fresh seeds, each scored by its final policy over 10 deterministic
episodes (`evaluation.at_end`). Printed: both sweeps' wall time and confirmed score
(mean, 95 % bootstrap CI, IQM), and the ratios.

    .venv/bin/python bench/warm_start.py          # ~15 min on 2 cores
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]


def spec(name: str, trials: int, steps: int, warm_from: str | None = None) -> dict[str, Any]:
    """The sweep as a user writes it: PPO's default space, optuna, ranked by each
    trial's final deterministic evaluation, the best confirmed on fresh seeds."""
    search: dict[str, Any] = {"method": "optuna", "num_samples": trials}
    if warm_from:
        search["warm_start"] = {"from": warm_from, "top_k": 2}
    return {
        "name": name,
        "algorithm": "PPO",
        "env": "CartPole-v1",
        "search": search,
        "metric": "evaluation/env_runners/episode_return_mean",
        "mode": "max",
        "scope": "last",
        "evaluation": {"at_end": True, "duration": 10},
        "stop": {"timesteps_total": steps},
        "resources": {"num_env_runners": 0},
        "max_concurrent_trials": 2,
        "checkpoint": {"at_end": True},
        "seed": 0,
        "confirm": {"top_k": 1, "seeds": 5},
    }


def run(data: Path, body: dict[str, Any], timeout: float) -> tuple[dict[str, Any], float]:
    """`tuner run --output json` of a spec in the bench's data dir: (summary, wall s)."""
    path = data / f"{body['name']}.yaml"
    path.write_text(yaml.safe_dump(body))
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    began = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tuner.cli",
            "run",
            str(path),
            "--output",
            "json",
            "--data-dir",
            str(data),
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
    wall = time.monotonic() - began
    if done.returncode != 0:
        sys.exit(f"{body['name']} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout), wall


def confirmed(summary: dict[str, Any]) -> dict[str, Any]:
    best = summary["best"] or {}
    return best.get("confirmed") or {}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=8, help="the cold sweep's trials")
    parser.add_argument("--steps", type=int, default=30_000, help="env steps per trial")
    parser.add_argument("--timeout", type=float, default=3600)
    parser.add_argument("--keep", action="store_true", help="keep the data directory")
    args = parser.parse_args(argv)
    data = Path(tempfile.mkdtemp(prefix="bench-warm-start-"))
    try:
        earlier_trials, earlier_steps = args.trials, args.steps // 2
        print(f"[1/3] the earlier sweep: {earlier_trials} trials x {earlier_steps:,} env steps")
        _, wall0 = run(data, spec("cp-earlier", earlier_trials, earlier_steps), args.timeout)
        print(f"      {wall0:.1f} s")
        print(f"[2/3] cold: {args.trials} trials x {args.steps:,} env steps")
        cold, cold_wall = run(data, spec("cp-cold", args.trials, args.steps), args.timeout)
        print(f"      {cold_wall:.1f} s")
        half = max(args.trials // 2, 1)
        print(f"[3/3] warm: {half} trials x {args.steps:,}, from the earlier sweep")
        warm_spec = spec("cp-warm", half, args.steps, warm_from="cp-earlier")
        warm, warm_wall = run(data, warm_spec, args.timeout)
        print(f"      {warm_wall:.1f} s")
        rows = [("cold", cold, cold_wall), ("warm", warm, warm_wall)]
        print(f"\n{'':6} {'trials':>6} {'wall s':>8} {'confirmed mean [95 % CI]':>32} {'IQM':>8}")
        for label, summary, wall in rows:
            c = confirmed(summary)
            ci = c.get("ci95") or [float("nan"), float("nan")]
            n = len([t for t in summary["trials"] if t["stage"] == "search"])
            mean = c.get("mean", float("nan"))
            print(
                f"{label:6} {n:>6} {wall:>8.1f} {mean:>14.1f} [{ci[0]:.1f}, {ci[1]:.1f}]"
                f"{'':>4} {c.get('iqm', float('nan')):>8.1f}"
            )
            print(f"       scores {c.get('scores')}; best config {json.dumps(c.get('config'))}")
        for w in warm.get("warnings", []):
            print(f"warm: {w}")
        cold_c, warm_c = confirmed(cold), confirmed(warm)
        if cold_c.get("mean") and warm_c.get("mean") is not None:
            print(f"RATIO warm_start.mean={warm_c['mean'] / cold_c['mean']:.2f} (goal >= 1.00)")
        print(f"RATIO warm_start.wall={warm_wall / cold_wall:.2f} (goal <= 0.60, warm / cold)")
    finally:
        if args.keep:
            print(f"kept {data}")
        else:
            shutil.rmtree(data, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
