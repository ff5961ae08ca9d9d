"""Where each side's CPU goes: ours (RLlib, flat replay path) vs. Stable-Baselines3.

`bench/vs_sb3.py` times whole runs on the wall clock, which on a shared machine moves with
whatever else runs. This splits one run of each side, on the CPU clock of the training
thread (time.thread_time: what other processes take is not counted), into its parts:

  SB3   collect_rollouts (policy, env steps, buffer writes) | train (replay sampling and
        gradient steps) | the rest of learn()
  ours  sampling (the env runner's episodes) | updates (the Learner's gradient steps) |
        the rest of Algorithm.train() (the flat buffer's writes and samples, the batch,
        RLlib's metrics, the weight sync)

Each side in a fresh process, torch threads 1, the same settings as vs_sb3.py's case
(its ALGOS: dqn, dqn_zoo, sac), the same env steps. Ours is the Algorithm a trial builds
(tuner.rllib.build_config, the lean paths included), trained in the process itself (no
Tune, no Ray actor: local Learner and env runner, num_env_runners 0).

    RATIO cpu_split.<case>.cpu = SB3's CPU per env step / ours (higher: ours cheaper)

    .venv/bin/python bench/cpu_split.py [--algos dqn,dqn_zoo,sac] [--steps 20000]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vs_sb3 import ALGOS, one_thread_env, our_spec  # noqa: E402  (bench/ is sys.path[0])

from bench._common import timed as common_timed  # noqa: E402

CASES = ("dqn", "dqn_zoo", "sac")


def timed(parts: dict[str, float], name: str, fn: Any) -> Any:
    """fn, its calls' CPU seconds (this thread's) added to parts[name]."""
    return common_timed(parts, name, fn, clock=time.thread_time)


def sb3_side(case: str, steps: int, seed: int) -> dict[str, Any]:
    import torch

    torch.set_num_threads(1)
    import gymnasium as gym
    import stable_baselines3 as sb3

    spec = ALGOS[case]
    parts = {"sampling": 0.0, "updates": 0.0}
    cls = getattr(sb3, spec["name"])
    model = cls("MlpPolicy", gym.make(spec["env"]), seed=seed, device="cpu", **spec["sb3"])
    # learn() calls these through the instance: its rollouts and its gradient steps
    model.collect_rollouts = timed(parts, "sampling", model.collect_rollouts)
    model.train = timed(parts, "updates", model.train)
    t = time.thread_time()
    model.learn(total_timesteps=steps)
    total = time.thread_time() - t
    return {
        "cpu_s": total,
        **parts,
        "env_steps": int(model.num_timesteps),
        "updates_n": int(model._n_updates),
    }


def our_side(case: str, steps: int, seed: int) -> dict[str, Any]:
    import torch

    torch.set_num_threads(1)
    import ray

    import tuner.rllib._fast_replay as fast_replay
    from tuner.rllib import build_config
    from tuner.spec import parse_spec

    spec = parse_spec(our_spec(case, seed, steps))
    ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False)
    algo = build_config(spec).build_algo()
    parts = {"sampling": 0.0, "updates": 0.0}
    # the flat path's two calls into RLlib (tuner/rllib/_fast_replay.py)
    fast_replay.sample_env_runners = timed(parts, "sampling", fast_replay.sample_env_runners)
    fast_replay.update_unreduced = timed(parts, "updates", fast_replay.update_unreduced)
    t = time.thread_time()
    while True:
        result = algo.train()
        if result["num_env_steps_sampled_lifetime"] >= steps:
            break
    total = time.thread_time() - t
    trained = result["learners"]["__all_modules__"]["num_module_steps_trained_lifetime"]
    out = {
        "cpu_s": total,
        **parts,
        "env_steps": int(result["num_env_steps_sampled_lifetime"]),
        "updates_n": round(trained / ALGOS[case]["batch"]),
    }
    algo.stop()
    ray.shutdown()
    return out


def row(case: str, side: str, r: dict[str, Any]) -> str:
    other = r["cpu_s"] - r["sampling"] - r["updates"]
    return (
        f"{case:<8} {side:<5} {r['cpu_s']:7.2f} {r['env_steps']:>8,} "
        f"{r['sampling'] / r['env_steps'] * 1e6:10.0f} {r['updates_n']:>8,} "
        f"{r['updates'] / max(1, r['updates_n']) * 1e6:9.0f} {other:7.2f} "
        f"{r['cpu_s'] / r['env_steps'] * 1e6:9.0f}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algos", default=",".join(CASES))
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--side", choices=["sb3", "ours"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    cases = [c for c in args.algos.split(",") if c]
    unknown = sorted(set(cases) - set(CASES))
    if unknown:
        parser.error(f"--algos: unknown {unknown}; choose from {list(CASES)}")
    if args.side:  # one side of one case, in this process: JSON on the last line
        side = sb3_side if args.side == "sb3" else our_side
        print(json.dumps(side(cases[0], args.steps, args.seed)))
        return 0
    if importlib.util.find_spec("stable_baselines3") is None:
        print("cpu_split: skipped, stable-baselines3 is not installed (the `bench` extra)")
        print("RESULT cpu_split=skipped (stable-baselines3 not installed)")
        return 0
    print(
        f"cpu_split: {args.steps:,} env steps per run, seed {args.seed}, torch threads 1, "
        "CPU seconds of the training thread"
    )
    print("case     side    CPU s  env steps  sample us/st  updates  us/upd  other s  CPU us/st")
    for case in cases:
        runs = {}
        for side in ("sb3", "ours"):
            cmd = [sys.executable, str(Path(__file__).resolve()), "--side", side]
            cmd += ["--algos", case, "--steps", str(args.steps), "--seed", str(args.seed)]
            done = subprocess.run(
                cmd, env=one_thread_env(), capture_output=True, text=True, check=False
            )
            if done.returncode != 0:
                print(f"{case} {side}: failed (exit {done.returncode})\n{done.stderr[-2000:]}")
                return 1
            runs[side] = json.loads(done.stdout.strip().splitlines()[-1])
            print(row(case, side, runs[side]))
        sb3, ours = runs["sb3"], runs["ours"]
        ratio = (sb3["cpu_s"] / sb3["env_steps"]) / (ours["cpu_s"] / ours["env_steps"])
        print(f"RATIO cpu_split.{case}.cpu={ratio:.2f} (SB3 CPU per env step / ours)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
