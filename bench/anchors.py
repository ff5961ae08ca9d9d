"""Published tuned scores from a 16-run sweep (`bench/quality.py --anchors`).

Each task runs at the env-step budget rl-zoo3's tuned agent was trained with, from the
spec a user writes: the algorithm, the env, the budget, 16 trials of the default search
space (no hand-set hyperparameter), the default or a named scheduler, and a
confirmation of the best config on 10 fresh seeds (disjoint from the search's), each
scored by 10 deterministic episodes of its final policy (the default final evaluation).
The score to reach is rl-zoo3's tuned agent from its benchmark.md (one run of a config
found by large Optuna studies and by hand, scored by the deterministic policy).

Per task it prints the confirmed mean, its 95 % bootstrap CI, the IQM, the anchor, the
gap (mean - anchor) and the walls of the search and of the confirmation, each a `tuner
run` timed from process start to end:

    RATIO anchors.<task>.<scheduler>.gap = confirmed mean - anchor
    RATIO anchors.<task>.published_<ours|plain|sb3>.gap   (with --published)

    .venv/bin/python bench/quality.py --anchors [--task acrobot-dqn ...]
        [--scheduler fifo|asha] [--trials 16] [--seeds 10] [--method optuna] [--race 2]
        [--playoff 3:2]

`--race N` adds `search.race: {seeds: N}` (opt-in, docs/spec.md): the 16 trials race
each config over up to N seeds, so a config that won by a lucky seed meets its next seed
in the search; its arm is `<scheduler>-raceN`.

`--playoff K:S` spends the 16 runs as a search of 16 - K x S trials and a playoff: the
search's top K configs on S fresh seeds each (`confirm: {top_k: K, seeds: S}`), the
best mean over them the answer. The answer then runs as a fixed config (a one-value
space) on the same 10 fresh seeds as the other arms' confirmation (spec seed + 16 ..),
so a config that won its one search seed by luck meets S more before it is named; its arm
is `<scheduler>-playoffKxS`.

`--published` is the ablation that separates the search from the rest: no search, rl-zoo3's
tuned yml entry for the task (hyperparams/<algo>.yml, DQN tasks) translated into RLlib's
names and fixed in `config` (`published_config`), the rest our preset's, then the same
confirmation on the same fresh seeds. A gap that stays is not the space's or the
search's; one that closes is.

    .venv/bin/python bench/quality.py --anchors --published --task acrobot-dqn

`--published plain` adds stable-baselines3's DQN to it (1-step returns, no double Q, no
dueling head: `n_step: 1, double_q: false, dueling: false`), so what stays is RLlib's
stack against SB3's. `--published sb3` trains the same entry with stable-baselines3 itself
(quality.py's `zoo_train_and_score`, the `bench` extra) on the same fresh seeds (spec seed
+ 1 ..), `--jobs` at a time (2), each scored by 10 deterministic episodes: what the anchor, one run
of one seed, is worth across seeds.

    .venv/bin/python bench/quality.py --anchors --published sb3 --task acrobot-dqn
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _common import ROOT, machine, run_timed, zoo_entry


@dataclass(frozen=True)
class Anchor:
    env: str
    algorithm: str
    steps: int
    score: float  # rl-zoo3's tuned agent, benchmark.md
    note: str = ""


# rl-zoo3 benchmark.md (its tuned agents, deterministic evaluation, one agent a task).
# No other study's score is printed beside it: ARLBench (Becktepe et al. 2024) runs these
# five tasks at these very budgets (automl/arlbench runscripts/configs/experiments/
# cc_acrobot_dqn, box2d_lunar_lander_dqn, cc_mountain_car_dqn, cc_pendulum_sac,
# cc_cartpole_ppo) but its repository, docs and dataset publish no tuned score per task
# (the dataset holds the raw optimisation runs); none found elsewhere either.
ANCHORS = {
    "acrobot-dqn": Anchor("Acrobot-v1", "DQN", 100_000, -76.6),
    "lunarlander-dqn": Anchor("LunarLander-v3", "DQN", 100_000, 154.4, "measured on v2"),
    "mountaincar-dqn": Anchor("MountainCar-v0", "DQN", 120_000, -100.8),
    "pendulum-sac": Anchor("Pendulum-v1", "SAC", 20_000, -157.0, "entry not marked tuned"),
    "cartpole-ppo": Anchor("CartPole-v1", "PPO", 100_000, 500.0),
}


def user_spec(name: str, anchor: Anchor, args: argparse.Namespace) -> dict[str, Any]:
    """The spec a user writes for the task: nothing hand-set but the budget, the number
    of trials, the search method, the scheduler and the confirmation."""
    spec: dict[str, Any] = {
        "name": f"anchor-{name}",
        "algorithm": anchor.algorithm,
        "env": anchor.env,
        "search": {"method": args.method, "num_samples": args.trials},
        "stop": {"timesteps_total": args.steps or anchor.steps},
        "resources": {"num_env_runners": 0},
        "confirm": {"top_k": 1, "seeds": args.seeds},
        "seed": 0,
    }
    if args.scheduler != "fifo":
        spec["scheduler"] = {"type": args.scheduler}
    if args.race:  # each config raced over up to --race seeds inside the 16 trials
        spec["search"]["race"] = {"seeds": args.race}
    if args.playoff:  # the top K configs on S fresh seeds each, inside the 16 runs
        top_k, seeds = args.playoff
        spec["search"]["num_samples"] = args.trials - top_k * seeds
        spec["confirm"] = {"top_k": top_k, "seeds": seeds}
    if args.published:
        config, model = published_config(anchor, args.steps or anchor.steps)
        if args.published == "plain":  # stable-baselines3's DQN
            config.update(n_step=1, double_q=False, dueling=False)
        spec["name"] = f"anchor-{name}-published-{args.published}"
        spec["search"] = {"method": "random", "num_samples": 1}
        spec["config"], spec["model"] = config, model
    return spec


def published_config(anchor: Anchor, steps: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """rl-zoo3's tuned entry as RLlib config and model keys (DQN): the keys the default
    space searches, the buffer's size and SB3's gradient clip; the rest stays our preset's."""
    if anchor.algorithm != "DQN":
        raise SystemExit(f"--published: translates DQN entries only, not {anchor.algorithm}")
    try:
        zoo = zoo_entry(anchor.algorithm.lower(), anchor.env)
    except KeyError:
        raise SystemExit(f"--published: rl-zoo3 has no DQN entry for {anchor.env}") from None
    batch = int(zoo.get("batch_size", 32))  # SB3's DQN defaults where the entry is silent
    train_freq = int(zoo.get("train_freq", 4))
    gradient_steps = int(zoo.get("gradient_steps", 1))
    if gradient_steps < 0:  # -1: as many gradient steps as env steps of the round
        gradient_steps = train_freq
    fraction = float(zoo.get("exploration_fraction", 0.1))
    config: dict[str, Any] = {
        "lr": float(zoo.get("learning_rate", 1e-4)),
        "gamma": float(zoo.get("gamma", 0.99)),
        "train_batch_size_per_learner": batch,
        "target_network_update_freq": int(zoo.get("target_update_interval", 10_000)),
        "num_steps_sampled_before_learning_starts": int(zoo.get("learning_starts", 100)),
        # samples trained per env step: batch x gradient_steps / train_freq
        "training_intensity": batch * gradient_steps / train_freq,
        "replay_buffer_config": {
            "type": "EpisodeReplayBuffer",
            "capacity": int(zoo.get("buffer_size", 1_000_000)),
        },
        "epsilon": [
            [0, float(zoo.get("exploration_initial_eps", 1.0))],
            [int(fraction * steps), float(zoo.get("exploration_final_eps", 0.05))],
        ],
        "grad_clip": float(zoo.get("max_grad_norm", 10.0)),
    }
    arch = re.search(r"net_arch=\[([0-9, ]*)\]", str(zoo.get("policy_kwargs", "")))
    hiddens = [int(x) for x in arch.group(1).split(",")] if arch else [64, 64]
    return config, {"fcnet_hiddens": hiddens}


def measure_spec(name: str, anchor: Anchor, args: argparse.Namespace, config: dict) -> dict:
    """--playoff: the playoff's answer as a fixed config (a one-value space, as sampled)
    on the other arms' fresh seeds (spec seed + trials ..), each scored by the final
    deterministic evaluation every trial that runs its budget gets."""
    space = {key: {"choice": [value]} for key, value in config.items()}
    return {
        "name": f"anchor-{name}-playoff-answer",
        "algorithm": anchor.algorithm,
        "env": anchor.env,
        "search": {"method": "grid", "num_samples": args.seeds, "space": space},
        "stop": {"timesteps_total": args.steps or anchor.steps},
        "resources": {"num_env_runners": 0},
        "seed": args.trials,
    }


def run_playoff(name: str, anchor: Anchor, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """--playoff: the sweep (search + playoff in one `tuner run`), then its answer on the
    10 fresh seeds; the playoff's own confirmation kept under `playoff`."""
    from tuner.seed_stats import stats

    result = run_task(name, anchor, args, tmp)
    if not result:
        return {}
    best = result["best"]
    measured = run_task(
        f"{name}-answer", anchor, args, tmp, measure_spec(name, anchor, args, best["config"])
    )
    if not measured:
        return {}
    trials = sorted(measured.get("trials") or [], key=lambda t: t.get("seed") or 0)
    scores = [t.get("score") for t in trials]
    finite = [x for x in scores if x is not None and math.isfinite(x)]
    result["playoff"] = best.get("confirmed")
    best["confirmed"] = {
        **stats(finite),
        "scores": scores,
        "seeds": [t.get("seed") for t in trials],
    }
    result["wall_search"] += result["wall_confirm"] or 0.0  # the search and its playoff
    result["wall_confirm"] = measured["wall_search"]  # the measurement: one search stage
    return result


def run_task(
    name: str,
    anchor: Anchor,
    args: argparse.Namespace,
    tmp: Path,
    spec: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One task's sweep (search + confirmation in one `tuner run`): its answer, the walls
    of the search and the confirmation (from the trials' own start and end times).
    `spec`: another spec than the user's (--playoff's measurement)."""
    spec = spec or user_spec(name, anchor, args)
    path = tmp / f"{name}.json"
    path.write_text(json.dumps(spec, indent=2))
    log, out = tmp / f"{name}.log", tmp / f"{name}.out.json"
    cmd = [sys.executable, "-m", "tuner.cli", "run", str(path), "--output", "json"]
    cmd += ["--data-dir", str(tmp / f"{name}-data")]
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "PYTHONUNBUFFERED": "1"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    started = time.time()
    rc, wall = run_timed(cmd, env, log, args.timeout, stdout=out)
    if rc == -9:  # past --timeout: shared cores slow a DQN task; the run resumes where it was
        print(f"{name}: `tuner run` passed --timeout ({args.timeout:.0f} s); resuming it once")
        rc, more = run_timed([*cmd, "--resume"], env, log, args.timeout, stdout=out)
        wall += more
    try:
        result = json.loads(out.read_text())
    except ValueError:
        result = {}
    if not result.get("best"):
        print(f"{name}: `tuner run` failed (exit {rc}); the end of {log}:")
        print(log.read_text(errors="replace")[-3000:])
        return {}
    confirm_start = _confirmation_start(tmp / f"{name}-data", started)
    result["wall_search"] = (confirm_start - started) if confirm_start else wall
    result["wall_confirm"] = (started + wall - confirm_start) if confirm_start else None
    return result


def _confirmation_start(data: Path, started: float) -> float | None:
    """When the confirmation stage began: its Tune run directory's creation time."""
    runs = [p for p in data.rglob("*-confirm") if p.is_dir()]
    return min(p.stat().st_ctime for p in runs) if runs else None


def fmt(x: float | None) -> str:
    return "—" if x is None or not math.isfinite(x) else f"{x:.1f}"


def report(name: str, anchor: Anchor, result: dict[str, Any], arm: str) -> None:
    """One task's line; `arm` is the scheduler, or `published_<stack>` for --published."""
    best = result["best"]
    confirmed = best.get("confirmed") or {}
    mean, iqm = confirmed.get("mean"), confirmed.get("iqm")
    ci = confirmed.get("ci95") or [None, None]
    note = f" ({anchor.note})" if anchor.note else ""
    gap = mean - anchor.score if mean is not None else None
    scores = confirmed.get("scores") or []
    scored = sum(score is not None for score in scores)
    # a confirmation stopped before its last seed: its mean is not the task's answer
    partial = f"  PARTIAL: {scored} of {len(scores)} seeds" if scored < len(scores) else ""
    print(
        f"{name:<16} {arm:<5} mean {fmt(mean):>7} [{fmt(ci[0])}, {fmt(ci[1])}] "
        f"IQM {fmt(iqm):>7}  anchor {anchor.score:>7.1f}{note}"
        f"  gap {fmt(gap):>7}  search {result['wall_search']:.0f} s, confirmation "
        f"{fmt(result['wall_confirm'])} s  scores {confirmed.get('scores')}{partial}"
    )
    print(f"  config {json.dumps(best.get('config'))}")
    if result.get("playoff"):
        playoff = result["playoff"]
        print(
            f"  playoff (its {len(playoff.get('scores') or [])} seeds): mean "
            f"{fmt(playoff.get('mean'))}, scores {playoff.get('scores')}"
        )
    if gap is not None and not partial:
        print(f"RATIO anchors.{name}.{arm}.gap = {gap:.1f}")


def run_sb3(name: str, anchor: Anchor, args: argparse.Namespace) -> int:
    """rl-zoo3's tuned entry trained by stable-baselines3 on the confirmation's fresh
    seeds (spec seed 0 + 1 ..), `--jobs` processes at a time: the scores and their stats."""
    from concurrent.futures import ProcessPoolExecutor

    from tuner.seed_stats import stats

    try:
        import rl_zoo3  # noqa: F401 - the `bench` extra
        from quality import Task, zoo_hyperparams, zoo_train_and_score
    except ImportError:
        print("--published sb3: needs the `bench` extra (stable-baselines3, rl_zoo3)")
        return 0
    steps = args.steps or anchor.steps
    task = Task(anchor.env, anchor.algorithm, anchor.algorithm.lower(), 1, steps)
    try:
        hyper = zoo_hyperparams(task, {})  # the entry as published, the budget ours
    except KeyError:
        print(f"{name}: rl-zoo3 has no {anchor.algorithm} entry for {anchor.env}")
        return 1
    seeds, scores, failed = list(range(1, args.seeds + 1)), [], []
    started = time.time()
    with ProcessPoolExecutor(args.jobs, initializer=_one_thread) as pool:
        runs = {s: pool.submit(zoo_train_and_score, task, hyper, s, steps) for s in seeds}
        for seed, run in runs.items():
            try:
                scores.append(run.result(timeout=max(1.0, started + args.timeout - time.time())))
                print(f"  sb3 seed {seed}: {scores[-1]:.1f}", flush=True)
            except Exception as error:  # a seed that fails or runs out of time is named
                print(f"{name}: sb3 seed {seed} failed: {error!r}")
                failed.append(seed)
        for run in runs.values():
            run.cancel()
    seeds = [s for s in seeds if s not in failed]
    if not scores:
        return 1
    st = stats(scores)
    ci = st["ci95"] or [None, None]
    print(
        f"{name:<16} sb3   mean {fmt(st['mean']):>7} [{fmt(ci[0])}, {fmt(ci[1])}] "
        f"IQM {fmt(st.get('iqm')):>7}  anchor {anchor.score:>7.1f}  gap "
        f"{fmt(st['mean'] - anchor.score):>7}  wall {time.time() - started:.0f} s"
    )
    print(f"  seeds {seeds}  scores {[round(x, 1) for x in scores]}")
    print(f"RATIO anchors.{name}.published_sb3.gap = {st['mean'] - anchor.score:.1f}")
    return 1 if failed else 0


def _top_k_seeds(text: str) -> tuple[int, int]:
    """--playoff's K:S (K at least 1, S at least 2: a mean of one seed is its draw)."""
    try:
        top_k, seeds = (int(part) for part in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--playoff: K:S, not {text!r}") from None
    if top_k < 1 or seeds < 2:
        raise argparse.ArgumentTypeError(f"--playoff: K >= 1 and S >= 2, not {text!r}")
    return top_k, seeds


def _one_thread() -> None:
    """One torch thread per SB3 process, as each of our trials gets from Ray."""
    import torch

    torch.set_num_threads(1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--anchors", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--task", action="append", choices=sorted(ANCHORS))
    parser.add_argument("--scheduler", choices=["fifo", "asha", "median"], default="fifo")
    parser.add_argument("--method", choices=["random", "optuna"], default="optuna")
    parser.add_argument("--trials", type=int, default=16)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--steps", type=int, help="override the budget: a smoke test only")
    parser.add_argument(
        "--published",
        nargs="?",
        const="ours",
        choices=["ours", "plain", "sb3"],
        help="no search: rl-zoo3's tuned entry fixed in config, then the confirmation "
        "(plain: with SB3's 1-step, single-Q, no-dueling DQN; sb3: trained by SB3 itself)",
    )
    parser.add_argument(
        "--race", type=int, help="search.race: {seeds: N}: configs raced over N seeds"
    )
    parser.add_argument(
        "--playoff",
        type=_top_k_seeds,
        help="K:S: 16 - K x S trials, then the top K configs on S fresh seeds each",
    )
    parser.add_argument("--jobs", type=int, default=2, help="--published sb3: seeds at a time")
    parser.add_argument(
        "--timeout", type=float, default=3600, help="per `tuner run` (s); one past it resumes once"
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args(argv)
    search = f"{args.trials} trials ({args.method}"
    search += f", raced over {args.race} seeds" if args.race else ""
    if args.playoff:
        top_k, seeds = args.playoff
        search = f"{args.trials - top_k * seeds} trials ({args.method}, then the top {top_k} "
        search += f"on {seeds} fresh seeds each"
    if args.published:
        search = f"rl-zoo3's tuned entry on {args.published} (no search"
    print(
        f"anchors: {search}, scheduler {args.scheduler}), the best "
        f"config on {args.seeds} fresh seeds x 10 deterministic episodes; {machine()}"
    )
    code = 0
    for name in args.task or list(ANCHORS):
        anchor = ANCHORS[name]
        tmp = Path(tempfile.mkdtemp(prefix=f"bench-anchors-{name}-"))
        try:
            if args.published == "sb3":
                code |= run_sb3(name, anchor, args)
                continue
            play = args.playoff and not args.published
            result = (run_playoff if play else run_task)(name, anchor, args, tmp)
            if result:
                arm = f"published_{args.published}" if args.published else args.scheduler
                arm += f"-race{args.race}" if args.race and not args.published else ""
                arm += "-playoff{}x{}".format(*args.playoff) if play else ""
                report(name, anchor, result, arm)
            else:
                code = 1
        finally:
            if args.keep:
                print(f"kept {tmp}")
            else:
                shutil.rmtree(tmp, ignore_errors=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
