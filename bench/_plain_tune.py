"""The benchmark sweep wired by hand with Ray Tune, the way a user writes it.

No tuner code: an RLlib PPOConfig with a grid over the learning rate, a
`tune.Tuner("PPO", ...)`, a stop dict, a checkpoint at the end of each trial.
The numbers come from _common.py so that it is the same sweep as the service's.

    .venv/bin/python bench/_plain_tune.py --storage DIR [--iterations 8]

Prints `PLAIN_RESULT {...}` (env steps, fit seconds) as its last line.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import ray
from _common import BATCH, EPOCHS, HIDDENS, ITERATIONS, LRS, MINIBATCH, SEED
from ray import tune
from ray.rllib.algorithms.ppo import PPOConfig
from ray.tune import CheckpointConfig, RunConfig


def since_launch() -> float:
    """Wall seconds since the benchmark launched this process (BENCH_T0, epoch s)."""
    return time.time() - float(os.environ.get("BENCH_T0") or time.time())


def main() -> None:
    imported_s = since_launch()
    parser = argparse.ArgumentParser()
    parser.add_argument("--storage", required=True)
    parser.add_argument("--iterations", type=int, default=ITERATIONS)
    args = parser.parse_args()

    # A lean local Ray of its own: 2 CPUs, no dashboard (cheaper than a bare ray.init(),
    # which would also join any `ray start` head on this machine, say the service's).
    ray.init(address="local", num_cpus=2, include_dashboard=False)
    ray_up_s = since_launch()
    config = (
        PPOConfig()
        .environment("CartPole-v1")
        .env_runners(num_env_runners=0)
        .training(
            lr=tune.grid_search(LRS),
            train_batch_size_per_learner=BATCH,
            minibatch_size=MINIBATCH,
            num_epochs=EPOCHS,
        )
        .rl_module(model_config={"fcnet_hiddens": HIDDENS})
        .debugging(seed=SEED)
    )
    tuner = tune.Tuner(
        "PPO",
        param_space=config,
        tune_config=tune.TuneConfig(max_concurrent_trials=2),
        run_config=RunConfig(
            name="plain",
            storage_path=args.storage,
            stop={"training_iteration": args.iterations},
            checkpoint_config=CheckpointConfig(checkpoint_at_end=True, num_to_keep=2),
        ),
    )
    t0 = time.perf_counter()
    results = tuner.fit()
    fit_s = time.perf_counter() - t0
    steps = sum(int(r.metrics.get("num_env_steps_sampled_lifetime") or 0) for r in results)
    errors = sum(r.error is not None for r in results)
    out = {
        "env_steps": steps,
        "fit_s": fit_s,
        "trials": len(results),
        "errors": errors,
        "imports_s": imported_s,
        "ray_init_s": ray_up_s - imported_s,
    }
    print("PLAIN_RESULT " + json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
