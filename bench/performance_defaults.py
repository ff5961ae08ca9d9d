"""The measured effect of each performance default (tuner/algorithms/algorithms.yaml):
one trial with the default vs. RLlib's own setting, same env steps, same update ratio
(checked from RLlib's counters), interleaved in one run.

    .venv/bin/python bench/performance_defaults.py [--quick]

Prints env steps/s of each and their ratio (ours / RLlib's): DQN on CartPole-v1 with
its defaults in force (on the flat replay path its flat_replay_defaults: 8 vectorised
envs x 4 steps a round), against RLlib's `auto` (1 step of 1 env); PPO on CartPole-v1
at stable-baselines3's settings (batch 2048, minibatch 64, 10 epochs) with its default
of 8 vectorised envs against 1 env (one iteration each), and at rl-zoo3's tuned CartPole
rollout (PPO-256: batch 256, 8 envs of 32 steps against 1 env, 8 iterations each); SAC
on Pendulum-v1 has no default, so both of its arms run RLlib's own settings (a control:
~1.0).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import one_trial_spec, ratio_line, table  # noqa: E402

CASES = {
    "DQN": {
        "env": "CartPole-v1",
        "config": {
            "train_batch_size_per_learner": 32,
            "num_steps_sampled_before_learning_starts": 0,
        },
    },
    "PPO": {
        "env": "CartPole-v1",
        "config": {"train_batch_size_per_learner": 2048, "minibatch_size": 64, "num_epochs": 10},
    },
    # the smallest rollout of PPO's default space: 8 envs of 32 steps (rl-zoo3's tuned
    # CartPole layout), timed over 8 iterations (2,048 env steps, as the row above)
    "PPO-256": {
        "env": "CartPole-v1",
        "config": {"train_batch_size_per_learner": 256, "minibatch_size": 64, "num_epochs": 10},
        "iterations": 8,
    },
    "SAC": {
        "env": "Pendulum-v1",
        "config": {
            "train_batch_size_per_learner": 256,
            "num_steps_sampled_before_learning_starts": 0,
        },
    },
}


def one_trial(algorithm: str, steps: int, rllib_own: bool) -> dict[str, Any]:
    """Trains one trial for `steps` env steps; its throughput and trained/sampled ratio."""
    from tuner.rllib._config import trainable_for
    from tuner.spec import parse_spec
    from tuner.sweep._tuner import trial_params

    case = CASES[algorithm]
    algorithm = algorithm.split("-")[0]
    config = {**case["config"]}
    resources: dict[str, Any] = {}
    if algorithm == "PPO":  # its default is the env count: RLlib's own is 1 env
        resources = {"num_envs_per_env_runner": 1} if rllib_own else {}
    else:
        config["min_sample_timesteps_per_iteration"] = steps
        if rllib_own:
            config["rollout_fragment_length"] = "auto"
    spec = parse_spec(one_trial_spec("perf", algorithm, case["env"], config, resources))
    algo = trainable_for(spec)(config={**trial_params(spec), "seed": 0})
    try:
        algo.train()  # warm-up iteration (module build, first compile of the update)
        # rows that went through a gradient step; RLlib's PPO adds the whole batch's env
        # steps to num_env_steps_trained once per minibatch, so PPO reads the module's row
        # count (its epochs over the batch and one bootstrap row per episode chunk)
        key = "num_module_steps_trained" if algorithm == "PPO" else "num_env_steps_trained"
        sampled = trained = 0
        t0 = time.perf_counter()
        for _ in range(case.get("iterations", 1)):
            result = algo.train()
            sampled += result["env_runners"]["num_env_steps_sampled"]
            trained += result["learners"]["__all_modules__"][key]
        elapsed = time.perf_counter() - t0
    finally:
        algo.stop()
    return {"steps_per_s": sampled / elapsed, "ratio": trained / sampled}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps, 1 repeat")
    parser.add_argument("--only", nargs="*", choices=list(CASES), help="algorithms")
    args = parser.parse_args()
    import ray

    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    # PPO samples one train batch an iteration, whatever `steps` says
    steps = {"DQN": 256, "SAC": 128} if args.quick else {"DQN": 1024, "SAC": 512}
    steps["PPO"] = steps["PPO-256"] = 0
    repeats = 1 if args.quick else 3
    headers = [
        "algorithm",
        "default env steps/s",
        "RLlib auto env steps/s",
        "speed-up",
        "trained/sampled (ours)",
        "trained/sampled (RLlib)",
    ]
    for algorithm in args.only or list(CASES):
        ours, theirs = [], []
        for _ in range(repeats):  # interleaved, so load drifts hit both alike
            ours.append(one_trial(algorithm, steps[algorithm], rllib_own=False))
            theirs.append(one_trial(algorithm, steps[algorithm], rllib_own=True))
        o = sum(r["steps_per_s"] for r in ours) / repeats
        t = sum(r["steps_per_s"] for r in theirs) / repeats
        row = [algorithm, f"{o:.1f}", f"{t:.1f}", f"{o / t:.2f}"]
        row += [f"{ours[0]['ratio']:g}", f"{theirs[0]['ratio']:g}"]
        print(table(headers, [row]), flush=True)  # each as it is measured
        print(ratio_line(f"performance_default_{algorithm}_speedup", o / t, ">= 1"), flush=True)
    ray.shutdown()


if __name__ == "__main__":
    main()
