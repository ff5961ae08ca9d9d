"""Sampler ablation: the Optuna sampler, start, race and scheduler a 16-trial sweep defaults to.

Each arm is the spec a user writes for a task of `quality.py` (the default space,
optuna, fifo, every trial ranked by its final deterministic evaluation), differing only
in `search.sampler`:

    optuna-own  TPE with Optuna's own random start (n_startup_trials 10, the default)
    tpe         TPE with a random start of a quarter of the trials (4 of 16)
    gp          Optuna's GPSampler with Optuna's own random start
    random      no model: search.method random (the floor)
    told-train  optuna-own, its study told each trial's last training return (as Tune's
                OptunaSearch tells it) instead of its final deterministic score
                (TUNER_OPTUNA_TOLD=train): what the default learned from before
    race2       optuna-own, each config raced over up to 2 seeds (search.race)
    race3       optuna-own, each config raced over up to 3 seeds
    random-race2  random, each config raced over up to 2 seeds
    asha        optuna-own under `scheduler: {type: asha}` (the README's form)
    hyperband   optuna-own under `scheduler: {type: hyperband}` (TPE over Hyperband's
                brackets; 16 trials: 10 judged at a third of the budget, 6 never)

Every arm runs the same search seeds (0, 1, ..); each search's best config is then run
on `--seeds` fresh seeds (the spec's confirmation, disjoint from the search's), each
scored by 10 deterministic episodes of its final policy. Per arm it prints the mean of
the confirmed means over the search seeds, their spread, and the ratio to optuna-own:

    RATIO sampler.<task>.<arm> = mean confirmed score, arm / optuna-own

(for negative returns the ratio is optuna-own's over the arm's, so > 1 is better).

    .venv/bin/python bench/sampler_ablation.py [--task cartpole-ppo] [--trials 16]
        [--steps 20000] [--searches 3] [--seeds 3] [--arms tpe,optuna-own,race2]
        [--scheduler fifo|asha|hyperband|median]
"""

from __future__ import annotations

import argparse
import math
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from quality import TASKS, search_spec, tuner_run

ARMS: dict[str, dict[str, Any] | None] = {
    "optuna-own": {"type": "tpe", "n_startup_trials": 10},
    "tpe": {"type": "tpe", "quarter": True},
    "gp": {"type": "gp"},
    "random": None,
    "told-train": {"type": "tpe", "n_startup_trials": 10},
    "race2": {"type": "tpe", "n_startup_trials": 10},
    "race3": {"type": "tpe", "n_startup_trials": 10},
    "random-race2": None,
    "asha": {"type": "tpe", "n_startup_trials": 10},
    "hyperband": {"type": "tpe", "n_startup_trials": 10},
}
# arms that differ from their sampler's arm in the spec's `search` besides the sampler
ARM_SEARCH: dict[str, dict[str, Any]] = {
    "race2": {"race": {"seeds": 2}},
    "race3": {"race": {"seeds": 3}},
    "random-race2": {"race": {"seeds": 2}},
}
# arms that differ from their sampler's arm in the scheduler only (over --scheduler)
ARM_SCHEDULER: dict[str, str] = {"asha": "asha", "hyperband": "hyperband"}
# arms that differ from their sampler's arm in the environment of `tuner run` only
ARM_ENV: dict[str, dict[str, str]] = {"told-train": {"TUNER_OPTUNA_TOLD": "train"}}


def arm_spec(
    task_name: str,
    arm: str,
    trials: int,
    steps: int,
    seed: int,
    seeds: int,
    scheduler: str = "fifo",
) -> dict[str, Any]:
    """The task's search spec with the arm's sampler and a confirmation of its best."""
    spec = search_spec(TASKS[task_name], trials, steps, seed)
    scheduler = ARM_SCHEDULER.get(arm, scheduler)
    if scheduler != "fifo":  # as the README writes it: the budget-aware defaults apply
        spec["scheduler"] = {"type": scheduler}
    spec["name"] = f"sampler-{arm}"
    if ARMS[arm] is None:
        spec["search"]["method"] = "random"
    else:
        sampler = dict(ARMS[arm])
        if sampler.pop("quarter", False):
            sampler["n_startup_trials"] = max(1, math.ceil(trials / 4))
        spec["search"]["sampler"] = sampler
    spec["search"].update(ARM_SEARCH.get(arm, {}))
    spec["confirm"] = {"top_k": 1, "seeds": seeds}
    return spec


def ratio(arm: float, base: float) -> float:
    """arm / base for returns where higher is better, base / arm for negative ones."""
    if base < 0 and arm < 0:
        return base / arm
    return arm / base if base else float("nan")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", choices=sorted(TASKS), default="cartpole-ppo")
    parser.add_argument("--trials", type=int, default=16)
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--searches", type=int, default=3, help="search seeds per arm")
    parser.add_argument("--seeds", type=int, default=3, help="fresh seeds per best config")
    parser.add_argument("--arms", default="optuna-own,tpe,gp,random")
    parser.add_argument(
        "--scheduler", choices=["fifo", "asha", "hyperband", "median"], default="fifo"
    )
    parser.add_argument("--timeout", type=float, default=3600)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args(argv)
    arms = [a for a in args.arms.split(",") if a]
    unknown = [a for a in arms if a not in ARMS]
    if unknown:
        parser.error(f"--arms: unknown {unknown}; known: {sorted(ARMS)}")
    print(
        f"sampler ablation: {args.task} ({args.scheduler}), {args.trials} trials x "
        f"{args.steps:,} env steps, "
        f"{args.searches} search seeds per arm, best config on {args.seeds} fresh seeds"
    )
    tmp = Path(tempfile.mkdtemp(prefix="bench-sampler-"))
    scores: dict[str, list[float]] = {a: [] for a in arms}
    walls: dict[str, list[float]] = {a: [] for a in arms}
    try:
        for seed in range(args.searches):  # arms interleaved: load drifts evenly
            for arm in arms:
                spec = arm_spec(
                    args.task, arm, args.trials, args.steps, seed, args.seeds, args.scheduler
                )
                started, where = time.time(), tmp / f"{arm}-{seed}"
                where.mkdir()
                result, wall = tuner_run(where, "run", spec, args.timeout, ARM_ENV.get(arm))
                confirmed = (result.get("best") or {}).get("confirmed") or {}
                mean = confirmed.get("mean")
                print(
                    f"  {arm:<10} search seed {seed}: confirmed mean {mean} "
                    f"({wall:.0f} s) config {(result.get('best') or {}).get('config')}",
                    flush=True,
                )
                if mean is not None:
                    scores[arm].append(float(mean))
                    walls[arm].append(time.time() - started)
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    base = scores.get("optuna-own") or []
    print(f"\n{'arm':<10} {'mean':>8} {'min':>8} {'max':>8} {'wall s':>7}  per search seed")
    for arm in arms:
        got = scores[arm]
        if not got:
            print(f"{arm:<10} no result")
            continue
        print(
            f"{arm:<10} {statistics.mean(got):>8.1f} {min(got):>8.1f} {max(got):>8.1f} "
            f"{statistics.mean(walls[arm]):>7.0f}  {[round(x, 1) for x in got]}"
        )
    for arm in arms:
        if base and scores[arm] and arm != "optuna-own":
            value = ratio(statistics.mean(scores[arm]), statistics.mean(base))
            where = "" if args.scheduler == "fifo" else f".{args.scheduler}"
            print(f"RATIO sampler.{args.task}{where}.{arm} = {value:.2f}")
    return 0 if all(scores[a] for a in arms) else 1


if __name__ == "__main__":
    sys.exit(main())
