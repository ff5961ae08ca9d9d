"""What a one-trial `tuner run` spends outside its trial (issue #12: under 15 s).

    .venv/bin/python bench/run_overhead.py [--runs 3]

Runs `python -m tuner.cli run SPEC --output json` on a one-trial PPO CartPole-v1 spec
(one iteration of 500 env steps) as a user runs it, each in its own process: first in
a fresh data directory (MLflow creates and migrates its SQLite database), then again
in the same one (the database exists), `--runs` times each way, interleaved. For each
run: the command's wall time, the trial's training time (`time_total_s` from its
result.json) and the difference, the overhead: imports, the local Ray start, MLflow,
the trial's process start and algorithm build, the final checkpoint and the summary.
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

from _common import mean, run_timed, table, tiny_spec  # noqa: E402

GOAL_S = 15.0


def one_trial_spec() -> dict[str, Any]:
    """The benchmark sweep cut to one trial of one iteration."""
    spec = tiny_spec("run-overhead", iterations=1)
    spec["search"] = {"method": "grid", "space": {"lr": {"grid": [1e-3]}}}
    spec["max_concurrent_trials"] = 1
    return spec


def trial_seconds(summary: dict[str, Any]) -> float:
    """The one trial's training time, as Tune measured it (time_total_s)."""
    root = Path(summary["path"])
    results = sorted(root.glob("*/result.json"))
    if not results:
        raise RuntimeError(f"no result.json under {root}")
    last = results[0].read_text().strip().splitlines()[-1]
    return float(json.loads(last)["time_total_s"])


def run_once(spec_file: Path, data_dir: Path, log: Path) -> dict[str, float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TUNER_")}
    out = log.with_suffix(".json")
    cmd = [sys.executable, "-m", "tuner.cli", "run", str(spec_file), "--output", "json"]
    cmd += ["--data-dir", str(data_dir)]
    rc, wall = run_timed(cmd, env, log, timeout=900, stdout=out)
    if rc != 0:
        raise RuntimeError(f"tuner run exited {rc}; see {log}")
    summary = json.loads(out.read_text())
    trial = trial_seconds(summary)
    return {"wall_s": wall, "trial_s": trial, "overhead_s": wall - trial}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="runs each way (default 3)")
    args = parser.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="tuner-overhead-"))
    try:
        spec_file = tmp / "spec.json"
        spec_file.write_text(json.dumps(one_trial_spec()))
        fresh: list[dict[str, float]] = []
        warm: list[dict[str, float]] = []
        for i in range(args.runs):
            data = tmp / f"data-{i}"
            fresh.append(run_once(spec_file, data, tmp / f"fresh-{i}.log"))
            warm.append(run_once(spec_file, data, tmp / f"warm-{i}.log"))
            print(f"run {i + 1}: fresh {fresh[-1]}, warm {warm[-1]}", flush=True)
        rows = [
            [name, f"{mean([r['wall_s'] for r in runs]):.1f}"]
            + [f"{mean([r['trial_s'] for r in runs]):.1f}"]
            + [f"{mean([r['overhead_s'] for r in runs]):.1f}"]
            + [" / ".join(f"{r['overhead_s']:.1f}" for r in runs)]
            for name, runs in (("new data dir", fresh), ("existing data dir", warm))
        ]
        print(table(["one-trial tuner run", "wall s", "trial s", "overhead s", "each"], rows))
        for name, runs in (("fresh", fresh), ("warm", warm)):
            value = mean([r["overhead_s"] for r in runs])
            print(f"RESULT run_overhead.{name}_s={value:.1f} (goal < {GOAL_S:.0f} s)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
