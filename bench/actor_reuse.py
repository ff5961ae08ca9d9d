"""A sweep of many short trials with reused trial actors vs a fresh actor per trial.

    .venv/bin/python bench/actor_reuse.py [--trials 8] [--iterations 2] [--repeats 2]

Runs `python -m tuner.cli run SPEC --output json` (each in its own process, a fresh
data directory each) on the same PPO CartPole-v1 sweep twice per repeat, interleaved:
`reuse_actors: true` (the default: a trial's actor runs the next trial, its RLlib
algorithm built again in place) and `reuse_actors: false` (a new actor process per
trial, Tune's behaviour for RLlib without a reset). Both arms run the same trials with
the same seeds, 2 at a time; what differs is each trial's process start, imports and
build. Ratio = mean wall time, reused / fresh (lower is better).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import mean, ratio_line, run_timed, table, tiny_spec  # noqa: E402


def sweep_spec(trials: int, iterations: int, reuse: bool) -> dict[str, Any]:
    """The benchmark sweep with `trials` learning rates (one trial each)."""
    spec = tiny_spec(f"reuse-{str(reuse).lower()}", iterations=iterations)
    lrs = [round(1e-4 * (i + 1), 6) for i in range(trials)]
    spec["search"] = {"method": "grid", "space": {"lr": {"grid": lrs}}}
    spec["reuse_actors"] = reuse
    return spec


def run_once(spec: dict[str, Any], tmp: Path, tag: str) -> tuple[float, dict[str, Any]]:
    """(wall seconds, the summary) of one `tuner run` of `spec` in a fresh data dir."""
    spec_file = tmp / f"{tag}.json"
    spec_file.write_text(json.dumps(spec))
    env = {k: v for k, v in os.environ.items() if not k.startswith("TUNER_")}
    out, log = tmp / f"{tag}.out.json", tmp / f"{tag}.log"
    cmd = [sys.executable, "-m", "tuner.cli", "run", str(spec_file), "--output", "json"]
    cmd += ["--data-dir", str(tmp / f"data-{tag}")]
    rc, wall = run_timed(cmd, env, log, timeout=1800, stdout=out)
    if rc != 0:
        raise RuntimeError(f"tuner run exited {rc}; see {log}")
    return wall, json.loads(out.read_text())


def trial_pids(summary: dict[str, Any]) -> int:
    """How many actor processes ran the sweep's trials (Tune's `pid` of each result)."""
    pids = set()
    for result in Path(summary["path"]).glob("*/result.json"):
        last = result.read_text().strip().splitlines()[-1]
        pids.add(json.loads(last)["pid"])
    return len(pids)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=8, help="trials per sweep (8)")
    parser.add_argument("--iterations", type=int, default=2, help="iterations per trial (2)")
    parser.add_argument("--repeats", type=int, default=2, help="runs per arm, interleaved (2)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="tuner-reuse-"))
    walls: dict[bool, list[float]] = {True: [], False: []}
    actors: dict[bool, int] = {}
    try:
        for i in range(args.repeats):
            for reuse in (False, True):
                spec = sweep_spec(args.trials, args.iterations, reuse)
                wall, summary = run_once(spec, tmp, f"{'reused' if reuse else 'fresh'}-{i}")
                if summary["status"] != "SUCCEEDED" or len(summary["trials"]) != args.trials:
                    raise RuntimeError(f"the sweep did not run its {args.trials} trials")
                walls[reuse].append(wall)
                actors[reuse] = trial_pids(summary)
                print(f"run {i + 1}, reuse_actors={reuse}: {wall:.1f} s", flush=True)
        rows = [
            [
                f"reuse_actors: {str(reuse).lower()}",
                f"{mean(walls[reuse]):.1f}",
                " / ".join(f"{w:.1f}" for w in walls[reuse]),
                str(actors[reuse]),
            ]
            for reuse in (True, False)
        ]
        print(f"\n{args.trials} PPO CartPole-v1 trials x {args.iterations} iterations, 2 at a time")
        print(table(["", "wall s (mean)", "each", "actor processes"], rows))
        ratio = mean(walls[True]) / mean(walls[False])
        print(ratio_line("actor_reuse.wall", ratio, "< 1.00, reused / fresh"))
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
