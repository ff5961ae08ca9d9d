"""A change's effect on one trial's speed: this checkout vs. another commit, interleaved.

Each arm is a fresh process that builds one trial the way a sweep does
(`tuner.rllib.build_config` from the spec, so every default and lean path of that
checkout is in force), runs a warm-up iteration, then times `--iters` iterations of
`algo.train()` on one core (torch threads 1, local sampling). The base arm imports tuner
from a git worktree of `--base` (made in a temporary folder), the other from this
checkout; the arms alternate (A B, B A, ...) to cancel drift. Both arms train from the
same seed, so the same learning shows as the same last return (printed): a change that
makes the same updates leaves it equal.

    RATIO trial_ab.<algo>.throughput = mean env steps/s, this checkout / base
    RATIO trial_ab.<algo>.cpu = mean env steps per CPU second of the arm's process (the
        measure that holds where other work shares the cores), this checkout / base

    .venv/bin/python bench/trial_ab.py [--base HEAD~1] [--algo ppo|dqn|dqn_zoo|dqn_lunar|sac]
        [--iters 8] [--pairs 3]

The settings are bench/vs_sb3.py's (SB3's defaults: PPO and DQN on CartPole-v1, SAC on
Pendulum-v1; DQN's epsilon decays over 5,000 steps; `dqn_zoo`: rl-zoo3's tuned CartPole
DQN, its epsilon over 16 % of 50,000 steps), and `dqn_lunar`: the LunarLander-v3 DQN the
anchors' searches pick (bench/anchors.py: batch 128, one update per env step, [256, 256],
learning from the first step, epsilon to 0.1 over 20,000 steps), the anchors' costliest
trial shape.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vs_sb3 import ALGOS  # noqa: E402  (bench/ is sys.path[0] for a script)

from bench._common import ROOT, ratio_line  # noqa: E402

CASES = {
    **ALGOS,
    "dqn_lunar": {
        "name": "DQN",
        "env": "LunarLander-v3",
        "steps": 100_000,
        "exploration": (0.2, 0.1),
        "config": {
            "lr": 2.5e-4,
            "gamma": 0.99,
            "train_batch_size_per_learner": 128,
            "training_intensity": 128,  # one update of 128 per env step
            "target_network_update_freq": 500,
            "num_steps_sampled_before_learning_starts": 0,
        },
        "model": {"fcnet_hiddens": [256, 256]},
    },
}

ARM = """
import json, time
import torch
torch.set_num_threads(1)
import ray
import tuner
from tuner.rllib import build_config
from tuner.spec import parse_spec
iters = {iters}
spec = parse_spec(json.loads({spec!r}))
# a Ray of its own: a plain ray.init() joins any local cluster another process left running
ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False)
algo = build_config(spec).build_algo()
start = algo.train()["num_env_steps_sampled_lifetime"]
began, cpu = time.perf_counter(), time.process_time()
for _ in range(iters):
    result = algo.train()
seconds, cpu_seconds = time.perf_counter() - began, time.process_time() - cpu
steps = result["num_env_steps_sampled_lifetime"] - start
print("ARM " + json.dumps({{
    "tuner": tuner.__file__, "steps_per_s": steps / seconds,
    "steps_per_cpu_s": steps / cpu_seconds,
    "last_return": result["env_runners"].get("episode_return_mean"),
}}))
algo.stop()
ray.shutdown()
"""


def case_spec(algo: str) -> dict:
    """The spec of one trial of case `algo` (CASES), as a sweep would get it."""
    case = CASES[algo]
    config = dict(case["config"])
    if algo == "dqn":
        config["epsilon"] = [[0, 1.0], [5000, 0.05]]
    elif "exploration" in case:  # dqn_zoo: over its fraction of vs_sb3's budget
        fraction, final = case["exploration"]
        config["epsilon"] = [[0, 1.0], [int(fraction * case["steps"]), final]]
    return {
        "name": "ab",
        "algorithm": case["name"],
        "env": case["env"],
        "config": config,
        "model": case["model"],
        "search": {"method": "random", "num_samples": 1, "space": {}},
        "stop": {"timesteps_total": 10**7},
        "seed": 0,
        "resources": {"num_env_runners": 0, **case.get("resources", {})},
    }


def run_arm(tree: Path, algo: str, iters: int) -> dict:
    """One arm in a fresh process, importing tuner from `tree`."""
    code = ARM.format(iters=iters, spec=json.dumps(case_spec(algo)))
    env = {
        **os.environ,
        "PYTHONPATH": str(tree),
        "OMP_NUM_THREADS": "1",
        "RAY_ADDRESS": "",
        "RAY_AUTH_MODE": os.environ.get("RAY_AUTH_MODE", "token"),
    }
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tree, env=env, capture_output=True, text=True
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("ARM ")]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"arm in {tree} failed:\n{done.stderr[-3000:]}")
    arm = json.loads(lines[-1][4:])
    if not arm["tuner"].startswith(str(tree)):
        raise SystemExit(f"arm in {tree} imported tuner from {arm['tuner']}")
    return arm


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base", default="HEAD~1", help="the commit to compare with")
    parser.add_argument("--algo", default="ppo", choices=sorted(CASES))
    parser.add_argument("--iters", type=int, default=8)
    parser.add_argument("--pairs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="trial-ab-") as tmp:
        base = Path(tmp) / "base"
        subprocess.run(
            ["git", "worktree", "add", "--detach", "-q", str(base), args.base], cwd=ROOT, check=True
        )
        try:
            arms: dict[str, list[dict]] = {"this": [], "base": []}
            for pair in range(args.pairs):
                order = [("base", base), ("this", ROOT)]
                for name, tree in order if pair % 2 == 0 else order[::-1]:
                    arm = run_arm(tree, args.algo, args.iters)
                    arms[name].append(arm)
                    print(
                        f"  pair {pair} {name}: {arm['steps_per_s']:,.0f} env steps/s "
                        f"({arm['steps_per_cpu_s']:,.0f} a CPU second), "
                        f"last return {arm['last_return']}",
                        flush=True,
                    )
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(base)], cwd=ROOT)
    this = statistics.mean(a["steps_per_s"] for a in arms["this"])
    then = statistics.mean(a["steps_per_s"] for a in arms["base"])
    print(f"{args.algo}: this checkout {this:,.0f} env steps/s, {args.base} {then:,.0f}")
    print(ratio_line(f"trial_ab.{args.algo}.throughput", this / then, "> 1.00: faster"))
    # the arm's own CPU time: the measure that holds on a shared machine (the wall
    # clock counts the time other processes take the core)
    this_cpu = statistics.mean(a["steps_per_cpu_s"] for a in arms["this"])
    then_cpu = statistics.mean(a["steps_per_cpu_s"] for a in arms["base"])
    print(ratio_line(f"trial_ab.{args.algo}.cpu", this_cpu / then_cpu, "> 1.00: less CPU a step"))


if __name__ == "__main__":
    main()
