"""GPU sharing: four trials at num_gpus_per_learner 0.25 run at once on one GPU.

Skipped without a CUDA GPU (CI has none); real wherever one is present.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

pytestmark = [pytest.mark.integration, pytest.mark.gpu]
needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU here")


@needs_gpu
def test_four_trials_share_one_gpu(tmp_path):
    spec = {
        "name": "gpu-packed",
        "algorithm": "PPO",
        "env": "CartPole-v1",
        "config": {
            "train_batch_size_per_learner": 500,
            "minibatch_size": 128,
            "num_epochs": 2,
            "min_time_s_per_iteration": 2,
        },
        "search": {"method": "grid", "num_samples": 4, "space": {"lr": {"grid": [3e-4]}}},
        "stop": {"training_iteration": 4},
        "resources": {"num_gpus_per_learner": 0.25},
        "max_concurrent_trials": 4,
    }
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    env = {**os.environ, "TUNER_DATA_DIR": str(tmp_path / "data")}
    out = subprocess.run(
        [sys.executable, "-m", "tuner.cli", "run", str(path), "--output", "json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    summary = json.loads(out.stdout)
    trials = summary["trials"]
    assert len(trials) == 4
    assert all(t["status"] == "TERMINATED" for t in trials)
    assert all(t["device"].startswith("cuda") for t in trials), [t["device"] for t in trials]
    spans = []
    for trial_dir in Path(summary["path"]).glob("TunerPPO_*"):
        rows = [json.loads(x) for x in (trial_dir / "result.json").read_text().splitlines()]
        spans.append((rows[0]["timestamp"] - rows[0]["time_this_iter_s"], rows[-1]["timestamp"]))
    assert len(spans) == 4
    assert max(s for s, _ in spans) < min(e for _, e in spans)  # all four ran at once


def test_gpu_fraction_is_checked_against_the_cluster():
    """Runs everywhere: the validator knows the cluster's GPU count."""
    from tuner.rllib import check_fits
    from tuner.spec import SpecError, parse_spec

    spec = parse_spec(
        {
            "name": "g",
            "algorithm": "PPO",
            "env": "CartPole-v1",
            "resources": {"num_gpus_per_learner": 0.25},
        }
    )
    with pytest.raises(SpecError, match="GPU"):
        check_fits(spec, [{"CPU": 16.0}])
    check_fits(spec, [{"CPU": 16.0, "GPU": 1.0}])
