"""Throughput of four PPO trials packed on one GPU (0.25 each) vs one trial per GPU.

Runs only where CUDA is available; prints why it skips otherwise. Both sweeps run
side by side in this process with the same budget; the ratio is packed / one-per-GPU
env-step throughput (sum of env steps over sweep wall time).
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import torch

from tuner.spec import parse_spec
from tuner.trials import ensure_ray, run_sweep

ITERATIONS = 5


def spec(fraction: float):
    return parse_spec(
        {
            "name": f"gpu-{fraction}",
            "algorithm": "PPO",
            "env": "CartPole-v1",
            "config": {
                "train_batch_size_per_learner": 4000,
                "minibatch_size": 512,
                "num_epochs": 4,
            },
            "model": {"fcnet_hiddens": [256, 256]},
            "search": {"method": "grid", "num_samples": 4, "space": {"lr": {"grid": [3e-4]}}},
            "stop": {"training_iteration": ITERATIONS},
            "resources": {"num_gpus_per_learner": fraction},
            "checkpoint": {"at_end": False},
        }
    )


def measure(fraction: float, storage: Path) -> tuple[float, int]:
    start = time.perf_counter()
    summary = run_sweep(spec(fraction), storage_path=storage, progress=False)
    wall = time.perf_counter() - start
    return wall, sum(t.env_steps for t in summary.trials)


def main() -> int:
    if not torch.cuda.is_available():
        print("gpu_packing: skipped, no CUDA GPU on this machine")
        return 0
    ensure_ray()
    name = torch.cuda.get_device_name(0)
    with tempfile.TemporaryDirectory() as tmp:
        one_wall, one_steps = measure(1.0, Path(tmp) / "one")
        packed_wall, packed_steps = measure(0.25, Path(tmp) / "packed")
    one, packed = one_steps / one_wall, packed_steps / packed_wall
    print(f"device: {name}")
    print(f"{'layout':<28}{'wall s':>10}{'env steps':>12}{'steps/s':>12}")
    print(f"{'1 trial per GPU (1.0)':<28}{one_wall:>10.1f}{one_steps:>12}{one:>12.0f}")
    print(f"{'4 trials packed (0.25)':<28}{packed_wall:>10.1f}{packed_steps:>12}{packed:>12.0f}")
    print(f"RATIO gpu_packed_vs_one_per_gpu={packed / one:.2f} (higher is better)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
