"""Search quality: our default search spaces vs. rl-zoo3's own tuner, same budget.

On each task both tools tune the same algorithm on the same env, on the same cores, with
the same number of trials and the same env steps per trial, two trials at a time, each
with its own default search space and pruner, as its users run it:

  ours     `tuner run SPEC --output json`: the algorithm's default search space (no
           search.space; narrowed to stop.timesteps_total by its budget rules),
           search.method optuna (TPE), our default scheduler (fifo: nothing stopped
           early), each trial ranked by its final policy played deterministically
           (evaluation.at_end over 5 episodes, metric evaluation/..., scope last),
           num_env_runners 0, max_concurrent_trials 2.
  rl-zoo3  `python -m rl_zoo3.train --algo ALGO --env ENV --optimize --n-trials N
           --n-timesteps T --n-jobs 2 --sampler tpe --pruner median --seed 0
           --no-optim-plots --num-threads 1` (its defaults: its hyperparams/ALGO.yml
           entry for the env with the sampled keys over it, TPE, the median pruner, 5
           deterministic evaluation episodes); the best trial comes from the study it
           writes to <log-folder>/ALGO/report_*.pkl. One torch thread, as each of our
           trials gets from Ray and as rl-zoo3's own help advises on CPU.

Each sweep is timed from process start to process end (imports, Ray start-up for
ours, the search, MLflow tracking for ours, rl-zoo3's report).

Then each tool's best config is trained again on the same S fresh seeds (disjoint
from every search trial's) with the same env-step budget, and every seed is scored
the same way: its final policy, deterministic actions, 10 episodes. These two stages are
not timed and run side by side (ours in its own process).

  ours     `tuner run` of a spec whose `config` / `model` fix the best values (nothing
           left to search), `confirm: {top_k: 1, seeds: S}`, `evaluation: {at_end:
           true, duration: 10}`: each seed's score is its trial's final evaluation.
  rl-zoo3  stable-baselines3 with the hyperparameters rl-zoo3 trains a study's trial
           with (its yml entry for the env, the best trial's params through its
           HYPERPARAMS_CONVERTER, its schedules and policy_kwargs), on each seed;
           scored with sb3's evaluate_policy(deterministic=True, n_eval_episodes=10).

Both sides' statistics come from tuner.sweep.stats (mean, 95 % bootstrap CI of the
mean) and iqm. Per task:

    RATIO quality.<task>.wall = wall(ours) / wall(rl-zoo3)
    RATIO quality.<task>.mean = confirmed mean(ours) / confirmed mean(rl-zoo3)
    RATIO quality.<task>.iqm  = confirmed IQM(ours) / confirmed IQM(rl-zoo3)

(for a task whose returns are negative, Pendulum's, the mean and IQM ratios are
rl-zoo3's over ours, so >= 1.00 still means ours is at least as good).

    .venv/bin/python bench/quality.py [--task cartpole-ppo ...] [--quick]
        [--trials N] [--steps T] [--seeds 5] [--searches 1]

With --searches N each tool's search runs N times, alternating (ours, rl-zoo3, ours,
...), pair i with seed i - 1 for both: the wall ratio is then of the two medians, each
wall printed; the first pair's best configs are the ones confirmed. A search's wall
follows what its sampler draws: ours draws the same configs for the same seed, rl-zoo3's
TPE with two threads differently on every run.

Tasks (trials x env steps per trial): cartpole-ppo (8 x 30k), acrobot-dqn (16 x 100k),
pendulum-sac (16 x 20k), lunarlander-ppo (16 x 200k; needs box2d, in the bench extra).
Needs the `bench` extra (stable-baselines3, rl_zoo3); without it, says how to install
it and exits 0. `--anchors` runs bench/anchors.py instead: ours alone against rl-zoo3's
published tuned scores (no extra needed).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import pickle
import shutil
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _common import ROOT, ratio_line, run_timed, table, zoo_entry

SEED = 0
SEARCH_EPISODES = 5  # rl-zoo3's n_eval_episodes while it optimizes
EVAL_EPISODES = 10
INSTALL = (
    "quality: skipped, needs stable-baselines3 and rl_zoo3 (the `bench` extra):\n"
    "    .venv/bin/pip install -c constraints.txt -e '.[bench]'\n"
    "or  .venv/bin/pip install -c constraints.txt stable-baselines3 rl_zoo3"
)


@dataclass(frozen=True)
class Task:
    env: str
    algorithm: str  # ours (RLlib)
    zoo: str  # rl-zoo3's --algo
    trials: int
    steps: int


TASKS = {
    "cartpole-ppo": Task("CartPole-v1", "PPO", "ppo", 8, 30_000),
    "acrobot-dqn": Task("Acrobot-v1", "DQN", "dqn", 16, 100_000),
    "pendulum-sac": Task("Pendulum-v1", "SAC", "sac", 16, 20_000),
    "lunarlander-ppo": Task("LunarLander-v3", "PPO", "ppo", 16, 200_000),
}


def child_env() -> dict[str, str]:
    """The environment of every command: this checkout's tuner first on the path."""
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "PYTHONUNBUFFERED": "1"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env


def fail(what: str, log: Path) -> None:
    print(f"{what} failed; the end of {log}:\n{log.read_text(errors='replace')[-3000:]}")


# -- ours ---------------------------------------------------------------------------

EVAL_METRIC = "evaluation/env_runners/episode_return_mean"


def search_spec(task: Task, trials: int, steps: int, seed: int = SEED) -> dict[str, Any]:
    """Our search as a user runs it: the default space, optuna, our default scheduler,
    each trial ranked by its final deterministic evaluation."""
    return {
        "name": "quality-search",
        "algorithm": task.algorithm,
        "env": task.env,
        "search": {"method": "optuna", "num_samples": trials},
        "metric": EVAL_METRIC,
        "scope": "last",
        "evaluation": {"at_end": True, "duration": SEARCH_EPISODES},
        "stop": {"timesteps_total": steps},
        "resources": {"num_env_runners": 0},
        "max_concurrent_trials": 2,
        "seed": seed,
    }


def confirm_spec(task: Task, values: dict[str, Any], trials: int, steps: int, seeds: int):
    """Our best config re-run on fresh seeds: nothing left to search (every searched
    key fixed, `model.*` under `model`), one search trial, then `seeds` confirmation
    trials, each scored by its final evaluation. Its seed is `trials`, so every seed
    here is after the search's (0 .. trials-1)."""
    model = {k.removeprefix("model."): v for k, v in values.items() if k.startswith("model.")}
    config = {k: v for k, v in values.items() if not k.startswith("model.")}
    return {
        "name": "quality-confirm",
        "algorithm": task.algorithm,
        "env": task.env,
        "config": config,
        "model": model,
        "search": {"method": "random", "num_samples": 1},
        "metric": EVAL_METRIC,
        "scope": "last",
        "evaluation": {"at_end": True, "duration": EVAL_EPISODES},
        "stop": {"timesteps_total": steps},
        "resources": {"num_env_runners": 0},
        "max_concurrent_trials": 2,
        "confirm": {"top_k": 1, "seeds": seeds},
        "seed": SEED + trials,
    }


def tuner_run(
    tmp: Path, name: str, spec: dict[str, Any], timeout: float, env: dict[str, str] | None = None
) -> tuple[dict, float]:
    """`tuner run SPEC --output json` in a fresh process (`env`: extra variables): (its
    JSON, wall seconds)."""
    path = tmp / f"{name}.json"
    path.write_text(json.dumps(spec, indent=2))
    log, out = tmp / f"{name}.log", tmp / f"{name}.out.json"
    cmd = [sys.executable, "-m", "tuner.cli", "run", str(path), "--output", "json"]
    cmd += ["--data-dir", str(tmp / f"{name}-data")]
    rc, wall = run_timed(cmd, {**child_env(), **(env or {})}, log, timeout, stdout=out)
    try:
        result = json.loads(out.read_text())
    except ValueError:
        result = {}
    if not result.get("best"):
        fail(f"`tuner run` ({name}, exit code {rc})", log)
        return {}, wall
    return result, wall


# -- rl-zoo3 ------------------------------------------------------------------------


def zoo_command(
    tmp: Path, task: Task, trials: int, steps: int, threads: int, seed: int = SEED
) -> list[str]:
    return [
        sys.executable,
        "-m",
        "rl_zoo3.train",
        "--algo",
        task.zoo,
        "--env",
        task.env,
        "--optimize",
        "--n-trials",
        str(trials),
        "--n-timesteps",
        str(steps),
        "--n-jobs",
        "2",
        "--sampler",
        "tpe",
        "--pruner",
        "median",
        "--seed",
        str(seed),
        "--log-folder",
        str(tmp / "zoo"),
        "--no-optim-plots",
        "--num-threads",
        str(threads),
    ]


def zoo_search(
    tmp: Path, task: Task, trials: int, steps: int, threads: int, timeout: float, seed: int = SEED
) -> tuple[Any, float]:
    """rl-zoo3's --optimize in a fresh process: (its optuna study, wall seconds)."""
    log = tmp / "zoo-search.log"
    cmd = zoo_command(tmp, task, trials, steps, threads, seed)
    rc, wall = run_timed(cmd, child_env(), log, timeout)
    reports = sorted((tmp / "zoo" / task.zoo).glob("report_*.pkl"))
    if rc != 0 or not reports:
        fail(f"rl_zoo3.train --optimize (exit code {rc})", log)
        return None, wall
    with reports[-1].open("rb") as f:  # written by rl-zoo3 in this run, in our temp dir
        return pickle.load(f), wall


def zoo_hyperparams(task: Task, params: dict[str, Any]) -> dict[str, Any]:
    """The sb3 kwargs rl-zoo3 trains a study's trial with: its hyperparams/ALGO.yml
    entry for the env, updated with the trial's params through its converter (what
    `rl_zoo3.train --storage ... --trial-id ...` does), n_envs and policy included; no
    params: the entry as published."""
    from rl_zoo3.hyperparams_opt import HYPERPARAMS_CONVERTER

    sampled = HYPERPARAMS_CONVERTER[task.zoo](params) if params else {}
    out = {**zoo_entry(task.zoo, task.env), **sampled}
    out.pop("n_timesteps", None)  # replaced by the budget, as `-n T` does
    return out


def zoo_train_and_score(task: Task, hyperparams: dict[str, Any], seed: int, steps: int) -> float:
    """Trains sb3 with rl-zoo3's hyperparameters on `seed` for `steps` env steps; the
    mean return of 10 deterministic episodes (sb3's evaluate_policy), observations
    normalized as in training where the yml entry says `normalize`."""
    import stable_baselines3
    from rl_zoo3.exp_manager import ExperimentManager
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.vec_env import VecNormalize

    kwargs = dict(hyperparams)
    n_envs = int(kwargs.pop("n_envs", 1))
    policy = kwargs.pop("policy")
    normalize = kwargs.pop("normalize", False)
    kwargs = ExperimentManager._preprocess_schedules(kwargs)  # as rl-zoo3 does
    if isinstance(kwargs.get("policy_kwargs"), str):  # as rl-zoo3 reads its yml files
        import torch.nn as nn  # noqa: F401 - the yml strings name nn.ReLU etc.

        kwargs["policy_kwargs"] = eval(kwargs["policy_kwargs"])  # noqa: S307 - rl-zoo3's yml
    env = make_vec_env(task.env, n_envs=n_envs, seed=seed)
    norm_kwargs = normalize if isinstance(normalize, dict) else {}
    if isinstance(normalize, str):
        norm_kwargs = eval(normalize)  # noqa: S307 - rl-zoo3's yml, e.g. "{'norm_reward': False}"
    if normalize:
        env = VecNormalize(env, **norm_kwargs)
    algo = getattr(stable_baselines3, task.zoo.upper())
    model = algo(policy, env, seed=seed, device="cpu", verbose=0, **kwargs)
    model.learn(steps)
    eval_env = make_vec_env(task.env, n_envs=1, seed=seed)
    if normalize:
        eval_env = VecNormalize(eval_env, training=False, norm_reward=False)
        eval_env.obs_rms = env.obs_rms
    mean_return, _ = evaluate_policy(
        model, eval_env, n_eval_episodes=EVAL_EPISODES, deterministic=True
    )
    env.close()
    eval_env.close()
    return float(mean_return)


# -- the report ---------------------------------------------------------------------


def fmt(x: float | None, digits: int = 1) -> str:
    return "—" if x is None or not math.isfinite(x) else f"{x:.{digits}f}"


def stats_line(st: dict[str, Any]) -> str:
    lo, hi = st["ci95"] or (None, None)
    return f"{fmt(st['mean'])} [{fmt(lo)}, {fmt(hi)}]"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--anchors" in argv:  # rl-zoo3's published tuned scores: bench/anchors.py
        from anchors import main as anchors

        return anchors(argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--task", action="append", choices=sorted(TASKS), help="repeatable (cartpole-ppo)"
    )
    parser.add_argument("--quick", action="store_true", help="2 trials x 2000 steps, 2 seeds")
    parser.add_argument("--trials", type=int, default=None, help="trials per tool (the task's)")
    parser.add_argument("--steps", type=int, default=None, help="env steps per trial (the task's)")
    parser.add_argument("--seeds", type=int, default=None, help="fresh seeds per best config (5)")
    parser.add_argument(
        "--zoo-threads",
        type=int,
        default=1,
        help="rl-zoo3's --num-threads (torch threads; -1: torch's default). Our trials get "
        "1 each from Ray (OMP_NUM_THREADS = the trial's 1 CPU)",
    )
    parser.add_argument(
        "--searches",
        type=int,
        default=1,
        help="timed search pairs per tool (ours, rl-zoo3, ours, ...); the wall ratio is of "
        "the medians, the first pair's best configs are confirmed",
    )
    parser.add_argument("--timeout", type=float, default=7200, help="per command (s)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args(argv)
    seeds = args.seeds or (2 if args.quick else 5)
    if seeds < 2:
        parser.error("--seeds: at least 2")

    missing = [m for m in ("stable_baselines3", "rl_zoo3") if importlib.util.find_spec(m) is None]
    if missing:
        print(INSTALL)
        print(f"(missing: {', '.join(missing)})")
        return 0
    import rl_zoo3
    import stable_baselines3

    print(
        f"rl_zoo3 {rl_zoo3.__version__}, stable-baselines3 {stable_baselines3.__version__}, "
        f"{os.cpu_count()} CPUs"
    )
    if args.quick:
        print("--quick: a smoke test of the bench at a tiny budget, not a measurement")
    code = 0
    for name in args.task or ["cartpole-ppo"]:
        task = TASKS[name]
        trials = args.trials or (2 if args.quick else task.trials)
        steps = args.steps or (2000 if args.quick else task.steps)
        print(
            f"\n== {name}: {task.algorithm} on {task.env}: {trials} trials x {steps:,} env "
            f"steps per tool, then each best config on {seeds} fresh seeds x {steps:,} env "
            f"steps, {EVAL_EPISODES} deterministic episodes each",
            flush=True,
        )
        tmp = Path(tempfile.mkdtemp(prefix=f"bench-quality-{name}-"))
        try:
            code |= compare(
                name, task, tmp, trials, steps, seeds, args.zoo_threads, args.timeout, args.searches
            )
        finally:
            if args.keep:
                print(f"kept {tmp}")
            else:
                shutil.rmtree(tmp, ignore_errors=True)
    return code


def compare(
    name: str,
    task: Task,
    tmp: Path,
    trials: int,
    steps: int,
    seeds: int,
    threads: int,
    timeout: float,
    searches: int = 1,
) -> int:
    # untimed warm-up: both tools' imports once, so neither pays a cold file cache
    for code in ("import tuner.sweep, ray.rllib.algorithms.ppo", "import rl_zoo3.train"):
        run_timed([sys.executable, "-c", code], child_env(), tmp / "warmup.log", 300)

    print("[1/4] our search: tuner run (optuna, no early stopping, 2 trials at a time)")
    ours, ours_wall = tuner_run(tmp, "search", search_spec(task, trials, steps), timeout)
    print(f"      {ours_wall:.1f} s", flush=True)
    if not ours:
        print(f"RESULT quality.{name}=failed (our search failed; see above)")
        return 1
    zoo_cmd = " ".join(zoo_command(tmp, task, trials, steps, threads)[1:])
    print(f"[2/4] rl-zoo3's search: python {zoo_cmd}", flush=True)
    study, zoo_wall = zoo_search(tmp, task, trials, steps, threads, timeout)
    print(f"      {zoo_wall:.1f} s", flush=True)
    if study is None:
        print(f"RESULT quality.{name}=failed (rl-zoo3's search failed; see above)")
        return 1

    from optuna.trial import TrialState

    # more timed pairs, alternating, in their own folders, pair i with seed SEED + i - 1
    # for both tools: a search's wall follows what its sampler draws (ours draws the same
    # configs for the same seed); only the first pair's picks are confirmed below
    walls = {"ours": [ours_wall], "zoo": [zoo_wall]}
    for i in range(2, searches + 1):
        rep, seed = tmp / f"pair{i}", SEED + i - 1
        rep.mkdir()
        more, wall = tuner_run(rep, "search", search_spec(task, trials, steps, seed), timeout)
        walls["ours"].append(wall)
        value = (more.get("best") or {}).get("metric_value")
        print(f"      pair {i}, seed {seed}: ours {wall:.1f} s (best {fmt(value)})", flush=True)
        more_study, wall = zoo_search(rep, task, trials, steps, threads, timeout, seed)
        walls["zoo"].append(wall)
        best = more_study.best_value if more_study is not None else None
        print(f"      pair {i}, seed {seed}: rl-zoo3 {wall:.1f} s (best {fmt(best)})", flush=True)

    if not [t for t in study.trials if t.state == TrialState.COMPLETE]:
        print(f"RESULT quality.{name}=failed (rl-zoo3 finished no trial)")
        return 1
    zoo_best = study.best_trial
    zoo_hp = zoo_hyperparams(task, zoo_best.params)
    search_trials = [t for t in ours["trials"] if t.get("stage", "search") == "search"]

    # The two untimed stages run side by side: our confirmation (a `tuner run` process)
    # in a thread while rl-zoo3's seeds train here. The seeds are the confirmation's own
    # (its spec's seed + 1 ..), checked against what it reports.
    seed_list = [SEED + trials + 1 + i for i in range(seeds)]
    print(
        f"[3/4] our best config on {seeds} fresh seeds (tuner run, confirm), beside\n"
        "[4/4] rl-zoo3's best config on the same seeds (stable-baselines3)",
        flush=True,
    )
    t0 = time.perf_counter()
    best_values = ours["best"]["config"]
    spec = confirm_spec(task, best_values, trials, steps, seeds)
    with ThreadPoolExecutor(max_workers=1) as pool:
        ours_run = pool.submit(tuner_run, tmp, "confirm", spec, timeout)
        if threads > 0:
            import torch

            torch.set_num_threads(threads)  # as rl_zoo3.train --num-threads does
        zoo_scores = []
        for seed in seed_list:
            zoo_scores.append(zoo_train_and_score(task, zoo_hp, seed, steps))
            print(f"      rl-zoo3 seed {seed}: {zoo_scores[-1]:.1f}", flush=True)
        confirmed, _ = ours_run.result()
    if not confirmed.get("confirmation"):
        print(f"RESULT quality.{name}=failed (our confirmation run failed; see above)")
        return 1
    ours_conf = confirmed["confirmation"][0]
    if list(ours_conf["seeds"]) != seed_list:
        print(f"RESULT quality.{name}=failed (our seeds {ours_conf['seeds']}, not {seed_list})")
        return 1
    ours_scores = [float("nan") if s is None else float(s) for s in ours_conf["scores"]]
    print(f"      {time.perf_counter() - t0:.1f} s, seeds {seed_list}", flush=True)

    from tuner.sweep import stats

    ours_st = stats([x for x in ours_scores if math.isfinite(x)])
    zoo_st = stats(zoo_scores)

    # -- per-trial tables -----------------------------------------------------------
    episodes = f"the final policy, {SEARCH_EPISODES} det. episodes"
    print(f"\nour search trials (score: {ours['metric']}, {episodes})")
    rows = [
        [t["trial_id"], t["status"], int(t["env_steps"]), fmt(t["score"])]
        for t in sorted(search_trials, key=lambda t: t["trial_id"])
    ]
    print(table(["trial", "status", "env steps", "score"], rows))
    print("\nrl-zoo3 search trials (value: mean of 5 deterministic episodes)")
    rows = [[t.number, t.state.name, fmt(t.value)] for t in study.trials]
    print(table(["trial", "state", "value"], rows))
    pruned = sum(1 for t in study.trials if t.state == TrialState.PRUNED)

    # -- side by side ---------------------------------------------------------------
    print("\nside by side")
    rows = [
        ["sweep wall s (process start to end)", f"{ours_wall:.1f}", f"{zoo_wall:.1f}"],
        ["trials (pruned)", f"{trials} (0)", f"{trials} ({pruned})"],
        [
            "best trial's search value",
            f"{fmt(ours['best']['metric_value'])} ({SEARCH_EPISODES} det. episodes)",
            f"{fmt(zoo_best.value)} (5 det. episodes)",
        ],
        ["seeds", " ".join(map(str, seed_list)), " ".join(map(str, seed_list))],
        [
            "per-seed score (10 det. episodes)",
            " ".join(fmt(x) for x in ours_scores),
            " ".join(fmt(x) for x in zoo_scores),
        ],
        ["mean [95 % bootstrap CI]", stats_line(ours_st), stats_line(zoo_st)],
        ["IQM", fmt(ours_st["iqm"]), fmt(zoo_st["iqm"])],
        ["std over seeds", fmt(ours_st["std"]), fmt(zoo_st["std"])],
    ]
    print(table(["", "ours (tuner run)", "rl-zoo3 (--optimize)"], rows))
    print("\nour best config (RLlib names; the rest RLlib's defaults):")
    print("  " + json.dumps(best_values, sort_keys=True))
    print("rl-zoo3's best trial (its sampled params):")
    print("  " + json.dumps(zoo_best.params, sort_keys=True))
    print("  trained with (sb3 kwargs): " + json.dumps(zoo_hp, sort_keys=True, default=repr))

    def better_ratio(a: float | None, b: float | None) -> float:
        """ours vs. rl-zoo3 as a ratio where >= 1 means ours is at least as good (for
        negative returns, rl-zoo3's over ours)."""
        if a is None or not b or not math.isfinite(a):
            return float("nan")
        return a / b if b > 0 else b / a

    ours_wall, zoo_wall = statistics.median(walls["ours"]), statistics.median(walls["zoo"])
    wall_ratio = ours_wall / zoo_wall
    if searches > 1:
        for tool, label in (("ours", "ours"), ("zoo", "rl-zoo3")):
            print(f"{label} search walls: " + ", ".join(f"{w:.1f}" for w in walls[tool]) + " s")
    m = "median " if searches > 1 else ""
    print(f"\nwall: ours {m}{ours_wall:.1f} s / rl-zoo3 {m}{zoo_wall:.1f} s = {wall_ratio:.2f}")
    print(ratio_line(f"quality.{name}.wall", wall_ratio, "<= 1.00, ours / rl-zoo3"))
    print(
        ratio_line(f"quality.{name}.mean", better_ratio(ours_st["mean"], zoo_st["mean"]), ">= 1.00")
    )
    print(ratio_line(f"quality.{name}.iqm", better_ratio(ours_st["iqm"], zoo_st["iqm"]), ">= 1.00"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
