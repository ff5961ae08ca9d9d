"""GPUs where they pay: trials packed on one GPU vs one per GPU vs CPU learners.

For each case (PPO on real Atari: ALE/Breakout-v5 under `wrappers: atari`, RLlib's Atari
preprocessing, with the Atari CNN; PPO on the same 84x84x4 frames from the synthetic
bench/_image_env.py, where stepping the env costs next to nothing, so the learner's share
shows; PPO on CartPole-v1 with an MLP) the same sweep of four trials (each samples in its
own process: `num_env_runners: 0`) runs four times, side by side in this process,
changing only `resources.num_gpus_per_learner`:

- 1.0:  one trial per GPU (on a one-GPU machine the four trials run one after another),
- 0.5:  two trials packed per GPU,
- 0.25: four trials packed per GPU,
- 0:    four trials with CPU learners (no GPU at all).

Throughput = env steps of all four trials / wall time of the whole `run_sweep` call
(trial start-up included); ratios are against 1.0. Also printed: how many trials
really ran at once (from their result.json timestamps), each trial's device, and the
mean seconds per iteration spent sampling and in the learner update (RLlib's
`timers/env_runner_sampling_timer` and `timers/learner_update_timer`).

Runs only where CUDA is available; prints why it skips otherwise (exit 0). The cnn and
cartpole cases took about 7 minutes on one H100 with 16 CPUs (2026-11-23), the atari
case about 160 s on one H200 (2026-11-26); figures in docs/benchmarks.md.

    python bench/gpu_packing.py [--cases atari cnn cartpole] [--iterations N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `bench._image_env` imports from the repository root
    sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from tuner.spec import parse_spec  # noqa: E402
from tuner.sweep import ensure_ray, run_sweep  # noqa: E402

TRIALS = 4
LAYOUTS = [  # (label, num_gpus_per_learner)
    ("1 trial per GPU (1.0)", 1.0),
    ("2 packed (0.5)", 0.5),
    ("4 packed (0.25)", 0.25),
    ("CPU learners (0)", 0.0),
]
ATARI_CONV = [[32, [8, 8], 4], [64, [4, 4], 2], [64, [3, 3], 1]]
CASES: dict[str, dict[str, Any]] = {  # run in this order
    "atari": {
        "title": "PPO ALE/Breakout-v5, wrappers atari (84x84x4), Atari CNN, 4 envs",
        "env": "ALE/Breakout-v5",
        "wrappers": "atari",  # the CNN defaults to ATARI_CONV with these wrappers
        "config": {"train_batch_size_per_learner": 1024, "minibatch_size": 256, "num_epochs": 4},
        "model": {},
        "envs": 4,
        "iterations": 2,
    },
    "cnn": {
        "title": "PPO 84x84x4 frames (bench._image_env:atari_like), Atari CNN, 4 envs",
        "env": "bench._image_env:atari_like",
        "config": {"train_batch_size_per_learner": 1024, "minibatch_size": 256, "num_epochs": 4},
        "model": {"conv_filters": ATARI_CONV},
        "envs": 4,
        "iterations": 2,
    },
    "cartpole": {
        "title": "PPO CartPole-v1, MLP [256, 256], 1 env",
        "env": "CartPole-v1",
        "config": {"train_batch_size_per_learner": 1000, "minibatch_size": 128, "num_epochs": 4},
        "model": {"fcnet_hiddens": [256, 256]},
        "envs": 1,
        "iterations": 2,
    },
}


def spec(case: dict[str, Any], fraction: float, iterations: int):
    return parse_spec(
        {
            "name": f"gpu-{fraction}",
            "algorithm": "PPO",
            "env": case["env"],
            "wrappers": case.get("wrappers"),
            "config": case["config"],
            "model": case["model"],
            "search": {"method": "grid", "num_samples": TRIALS, "space": {"lr": {"grid": [3e-4]}}},
            "stop": {"training_iteration": iterations},
            "resources": {
                "num_env_runners": 0,
                "num_envs_per_env_runner": case["envs"],
                "num_gpus_per_learner": fraction,
            },
            "max_concurrent_trials": TRIALS,
            "checkpoint": {"at_end": False},
        }
    )


def _timer(row: dict[str, Any], name: str) -> float | None:
    value = (row.get("timers") or {}).get(name)
    return float(value) if isinstance(value, int | float) else None


def trial_stats(experiment: Path) -> dict[str, Any]:
    """Most trials running at once, and mean sample / learn seconds per iteration."""
    spans, sample, learn = [], [], []
    for result in experiment.glob("*/result.json"):
        rows = [json.loads(x) for x in result.read_text().splitlines() if x.strip()]
        if not rows:
            continue
        spans.append((rows[0]["timestamp"] - rows[0]["time_this_iter_s"], rows[-1]["timestamp"]))
        for row in rows:
            s = _timer(row, "env_runner_sampling_timer")
            u = _timer(row, "learner_update_timer")
            sample += [s] if s is not None else []
            learn += [u] if u is not None else []
    at_once = max((sum(a <= t < b for a, b in spans) for t, _ in spans), default=0)
    return {
        "at_once": at_once,
        "sample": statistics.mean(sample) if sample else float("nan"),
        "learn": statistics.mean(learn) if learn else float("nan"),
    }


def measure(case: dict[str, Any], fraction: float, iterations: int, storage: Path):
    start = time.perf_counter()
    summary = run_sweep(spec(case, fraction, iterations), storage_path=storage, progress=False)
    wall = time.perf_counter() - start
    bad = [f"{t.trial_id}: {t.status} {t.error or ''}"[:300] for t in summary.trials]
    bad = [b for b, t in zip(bad, summary.trials, strict=True) if t.status != "TERMINATED"]
    devices = sorted({t.device or "?" for t in summary.trials})
    row = {
        "wall": wall,
        "steps": sum(t.env_steps or 0 for t in summary.trials),
        "devices": ",".join(devices),
        "errors": bad,
        **trial_stats(Path(summary.path)),
    }
    row["rate"] = row["steps"] / wall
    return row


def run_case(name: str, iterations: int | None, tmp: Path) -> list[str]:
    case = CASES[name]
    its = iterations or case["iterations"]
    print(f"\n== {name}: {case['title']}; {TRIALS} trials x {its} iterations", flush=True)
    print(
        f"{'layout':<24}{'at once':>8}{'wall s':>8}{'env steps':>11}{'steps/s':>9}"
        f"{'vs 1/GPU':>9}{'sample s':>9}{'learn s':>9}  device",
        flush=True,
    )
    rows = []
    for label, fraction in LAYOUTS:  # 1.0 first: each row prints as soon as it is measured
        r = measure(case, fraction, its, tmp / f"{name}-{fraction}")
        rows.append((label, r))
        one = rows[0][1]["rate"]
        print(
            f"{label:<24}{r['at_once']:>8}{r['wall']:>8.1f}{r['steps']:>11}{r['rate']:>9.0f}"
            f"{r['rate'] / one:>8.2f}x{r['sample']:>9.2f}{r['learn']:>9.2f}  {r['devices']}",
            flush=True,
        )
        for err in r["errors"]:
            print(f"   trial failed: {err}", flush=True)
    by = {fraction: r["rate"] / one for (_, fraction), (_, r) in zip(LAYOUTS, rows, strict=True)}
    return [
        f"RATIO gpu_{name}_packed2_vs_one_per_gpu={by[0.5]:.2f} (higher is better)",
        f"RATIO gpu_{name}_packed4_vs_one_per_gpu={by[0.25]:.2f} (higher is better)",
        f"RATIO gpu_{name}_cpu_learners_vs_one_per_gpu={by[0.0]:.2f} (for information)",
    ]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", nargs="+", choices=sorted(CASES), default=list(CASES))
    ap.add_argument("--iterations", type=int, help="iterations per trial (default: per case)")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print(
            "gpu_packing: skipped, no CUDA GPU on this machine (torch.cuda.is_available() is "
            "False); the CPU-learner arm runs only beside the GPU ones"
        )
        return 0
    os.chdir(ROOT)  # ensure_ray puts the working directory on the trial workers' PYTHONPATH
    ensure_ray()
    props = torch.cuda.get_device_properties(0)
    print(
        f"device: {props.name}, {props.total_memory / 2**30:.0f} GiB; "
        f"{os.cpu_count()} CPUs; torch {torch.__version__}"
    )
    ratios = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.cases:
            ratios += run_case(name, args.iterations, Path(tmp))
    print()
    print("\n".join(ratios))
    return 0


if __name__ == "__main__":
    sys.exit(main())
