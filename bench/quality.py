"""Search quality: our default PPO search space vs. rl-zoo3's own tuner, same budget.

Both tools tune PPO on CartPole-v1 on the same cores, with the same number of trials
and the same env steps per trial, each as its users run it:

  ours     `tuner run SPEC --output json`: PPO, the default search space (no
           search.space), search.method optuna (TPE), the median stopping rule
           (closest to rl-zoo3's median pruner; grace period a third of the steps, as
           rl-zoo3's n_warmup_steps), stop.timesteps_total per trial, num_env_runners 0,
           two trials at a time (max_concurrent_trials: 2).
  rl-zoo3  `python -m rl_zoo3.train --algo ppo --env CartPole-v1 --optimize
           --n-trials N --n-timesteps T --n-jobs 1 --sampler tpe --pruner median
           --seed 0 --no-optim-plots --num-threads 1` (its defaults: TPE sampler, median
           pruner, one trial at a time); the best trial comes from the study it writes
           to <log-folder>/ppo/report_*.pkl. One torch thread, as each of our trials
           gets from Ray and as rl-zoo3's own help advises on CPU: with torch's default
           (2 threads here) and other load on the cores, sb3's updates were ~20x slower
           (--zoo-threads -1 gives rl-zoo3's default back).

Each sweep is timed from process start to process end (imports, Ray start-up for
ours, the search, MLflow tracking for ours, rl-zoo3's report).

Then each tool's best config is trained again on the same S fresh seeds (disjoint
from every search trial's) with the same env-step budget, and every seed is scored
the same way: its final policy, deterministic actions, 10 episodes.

  ours     `tuner run` of a spec whose `config` fixes the best values (nothing left to
           search), `confirm: {top_k: 1, seeds: S}`, `evaluation: {interval: <last
           iteration>, duration: 10}`: the confirmation stage's per-seed scores are
           tuner.rllib.evaluate_checkpoint of each seed's final checkpoint.
  rl-zoo3  stable-baselines3 PPO with the hyperparameters rl-zoo3 trains a study's
           trial with (its hyperparams/ppo.yml CartPole-v1 entry, the best trial's
           params through its HYPERPARAMS_CONVERTER, its schedules), on each seed;
           scored with sb3's evaluate_policy(deterministic=True, n_eval_episodes=10).

Both sides' statistics come from tuner.sweep._confirm.stats (mean, 95 % bootstrap
CI of the mean) and iqm.

    RATIO quality.wall = wall(ours) / wall(rl-zoo3)
    RATIO quality.mean = confirmed mean(ours) / confirmed mean(rl-zoo3)
    RATIO quality.iqm  = confirmed IQM(ours) / confirmed IQM(rl-zoo3)

    .venv/bin/python bench/quality.py [--quick] [--trials 8] [--steps 30000] [--seeds 5]

Needs the `bench` extra (stable-baselines3, rl_zoo3); without it, says how to
install it and exits 0.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import pickle
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import ROOT, ratio_line, run_timed, table

ENV = "CartPole-v1"
SEED = 0
EVAL_EPISODES = 10
INSTALL = (
    "quality: skipped, needs stable-baselines3 and rl_zoo3 (the `bench` extra):\n"
    "    .venv/bin/pip install -c constraints.txt -e '.[bench]'\n"
    "or  .venv/bin/pip install -c constraints.txt stable-baselines3 rl_zoo3"
)


def child_env() -> dict[str, str]:
    """The environment of every command: this checkout's tuner first on the path."""
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "PYTHONUNBUFFERED": "1"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env


def fail(what: str, log: Path) -> None:
    print(f"{what} failed; the end of {log}:\n{log.read_text(errors='replace')[-3000:]}")


# -- ours ---------------------------------------------------------------------------


def search_spec(trials: int, steps: int) -> dict[str, Any]:
    """Our search: the default PPO space through Optuna, the median stopping rule."""
    return {
        "name": "quality-search",
        "algorithm": "PPO",
        "env": ENV,
        "search": {"method": "optuna", "num_samples": trials},
        "scheduler": {
            "type": "median",
            "time_attr": "num_env_steps_sampled_lifetime",
            "grace_period": max(1, steps // 3),
        },
        "stop": {"timesteps_total": steps},
        "resources": {"num_env_runners": 0},
        "max_concurrent_trials": 2,
        "seed": SEED,
    }


def confirm_spec(config: dict[str, Any], trials: int, steps: int, seeds: int, last_iter: int):
    """Our best config re-run on fresh seeds: nothing left to search (every default-space
    key fixed under `config`), one search trial, then `seeds` confirmation trials. Its
    seed is `trials`, so every seed here is after the search's (0 .. trials-1)."""
    return {
        "name": "quality-confirm",
        "algorithm": "PPO",
        "env": ENV,
        "config": config,
        "search": {"method": "random", "num_samples": 1},
        "stop": {"timesteps_total": steps},
        "resources": {"num_env_runners": 0},
        "max_concurrent_trials": 2,
        "evaluation": {"interval": last_iter, "duration": EVAL_EPISODES},
        "confirm": {"top_k": 1, "seeds": seeds},
        "seed": SEED + trials,
    }


def tuner_run(tmp: Path, name: str, spec: dict[str, Any], timeout: float) -> tuple[dict, float]:
    """`tuner run SPEC --output json` in a fresh process: (its JSON, wall seconds)."""
    path = tmp / f"{name}.json"
    path.write_text(json.dumps(spec, indent=2))
    log, out = tmp / f"{name}.log", tmp / f"{name}.out.json"
    cmd = [sys.executable, "-m", "tuner.cli", "run", str(path), "--output", "json"]
    cmd += ["--data-dir", str(tmp / f"{name}-data")]
    rc, wall = run_timed(cmd, child_env(), log, timeout, stdout=out)
    try:
        result = json.loads(out.read_text())
    except ValueError:
        result = {}
    if rc != 0 or not result.get("best"):
        fail(f"`tuner run` ({name}, exit code {rc})", log)
        return {}, wall
    return result, wall


# -- rl-zoo3 ------------------------------------------------------------------------


def zoo_command(tmp: Path, trials: int, steps: int, threads: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "rl_zoo3.train",
        "--algo",
        "ppo",
        "--env",
        ENV,
        "--optimize",
        "--n-trials",
        str(trials),
        "--n-timesteps",
        str(steps),
        "--n-jobs",
        "1",
        "--sampler",
        "tpe",
        "--pruner",
        "median",
        "--seed",
        str(SEED),
        "--log-folder",
        str(tmp / "zoo"),
        "--no-optim-plots",
        "--num-threads",
        str(threads),
    ]


def zoo_search(
    tmp: Path, trials: int, steps: int, threads: int, timeout: float
) -> tuple[Any, float]:
    """rl-zoo3's --optimize in a fresh process: (its optuna study, wall seconds)."""
    log = tmp / "zoo-search.log"
    rc, wall = run_timed(zoo_command(tmp, trials, steps, threads), child_env(), log, timeout)
    reports = sorted((tmp / "zoo" / "ppo").glob("report_*.pkl"))
    if rc != 0 or not reports:
        fail(f"rl_zoo3.train --optimize (exit code {rc})", log)
        return None, wall
    with reports[-1].open("rb") as f:  # written by rl-zoo3 in this run, in our temp dir
        return pickle.load(f), wall


def zoo_hyperparams(params: dict[str, Any]) -> dict[str, Any]:
    """The sb3 kwargs rl-zoo3 trains a study's trial with: its hyperparams/ppo.yml entry
    for the env, updated with the trial's params through its converter (what
    `rl_zoo3.train --storage ... --trial-id ...` does), n_envs and policy included."""
    import rl_zoo3
    import yaml
    from rl_zoo3.hyperparams_opt import HYPERPARAMS_CONVERTER

    defaults = yaml.safe_load((Path(rl_zoo3.__file__).parent / "hyperparams" / "ppo.yml").open())
    out = {**defaults[ENV], **HYPERPARAMS_CONVERTER["ppo"](params)}
    out.pop("n_timesteps", None)  # replaced by the budget, as `-n T` does
    return out


def zoo_train_and_score(hyperparams: dict[str, Any], seed: int, steps: int) -> float:
    """Trains sb3 PPO with rl-zoo3's hyperparameters on `seed` for `steps` env steps;
    the mean return of 10 deterministic episodes (sb3's evaluate_policy)."""
    from rl_zoo3.exp_manager import ExperimentManager
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.evaluation import evaluate_policy

    kwargs = dict(hyperparams)
    n_envs = int(kwargs.pop("n_envs", 1))
    policy = kwargs.pop("policy")
    kwargs = ExperimentManager._preprocess_schedules(kwargs)  # as rl-zoo3 does
    env = make_vec_env(ENV, n_envs=n_envs, seed=seed)
    model = PPO(policy, env, seed=seed, device="cpu", verbose=0, **kwargs)
    model.learn(steps)
    eval_env = make_vec_env(ENV, n_envs=1, seed=seed)
    mean_return, _ = evaluate_policy(
        model, eval_env, n_eval_episodes=EVAL_EPISODES, deterministic=True
    )
    env.close()
    eval_env.close()
    return float(mean_return)


def zoo_trial_steps(params: dict[str, Any], steps: int, n_envs: int) -> int:
    """Env steps an unpruned rl-zoo3 trial samples: whole rollouts of n_steps x n_envs
    until `steps` is reached (sb3's learn loop)."""
    rollout = 2 ** int(params["n_steps_pow"]) * n_envs
    return math.ceil(steps / rollout) * rollout


# -- the report ---------------------------------------------------------------------


def fmt(x: float | None, digits: int = 1) -> str:
    return "—" if x is None or not math.isfinite(x) else f"{x:.{digits}f}"


def stats_line(st: dict[str, Any]) -> str:
    lo, hi = st["ci95"] or (None, None)
    return f"{fmt(st['mean'])} [{fmt(lo)}, {fmt(hi)}]"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 trials x 2000 steps, 2 seeds")
    parser.add_argument("--trials", type=int, default=None, help="trials per tool (8)")
    parser.add_argument("--steps", type=int, default=None, help="env steps per trial (30000)")
    parser.add_argument("--seeds", type=int, default=None, help="fresh seeds per best config (5)")
    parser.add_argument(
        "--zoo-threads",
        type=int,
        default=1,
        help="rl-zoo3's --num-threads (torch threads; -1: torch's default). Our trials get "
        "1 each from Ray (OMP_NUM_THREADS = the trial's 1 CPU)",
    )
    parser.add_argument("--timeout", type=float, default=3600, help="per command (s)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args(argv)
    trials = args.trials or (2 if args.quick else 8)
    steps = args.steps or (2000 if args.quick else 30000)
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
        f"PPO on {ENV}: {trials} trials x {steps:,} env steps per tool, then each best config "
        f"on {seeds} fresh seeds x {steps:,} env steps, {EVAL_EPISODES} deterministic episodes "
        f"each\nrl_zoo3 {rl_zoo3.__version__}, stable-baselines3 {stable_baselines3.__version__}"
        f", {os.cpu_count()} CPUs",
        flush=True,
    )
    if args.quick:
        print("--quick: a smoke test of the bench at a tiny budget, not a measurement")
    tmp = Path(tempfile.mkdtemp(prefix="bench-quality-"))
    try:
        return compare(tmp, trials, steps, seeds, args.zoo_threads, args.timeout)
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def compare(tmp: Path, trials: int, steps: int, seeds: int, threads: int, timeout: float) -> int:
    # untimed warm-up: both tools' imports once, so neither pays a cold file cache
    for code in ("import tuner.sweep, ray.rllib.algorithms.ppo", "import rl_zoo3.train"):
        run_timed([sys.executable, "-c", code], child_env(), tmp / "warmup.log", 300)

    print("\n[1/4] our search: tuner run (optuna, median stopping, 2 trials at a time)", flush=True)
    ours, ours_wall = tuner_run(tmp, "search", search_spec(trials, steps), timeout)
    print(f"      {ours_wall:.1f} s", flush=True)
    if not ours:
        print("RESULT quality=failed (our search failed; see above)")
        return 1
    zoo_cmd = " ".join(zoo_command(tmp, trials, steps, threads)[1:])
    print(f"[2/4] rl-zoo3's search: python {zoo_cmd}", flush=True)
    study, zoo_wall = zoo_search(tmp, trials, steps, threads, timeout)
    print(f"      {zoo_wall:.1f} s", flush=True)
    if study is None:
        print("RESULT quality=failed (rl-zoo3's search failed; see above)")
        return 1

    from optuna.trial import TrialState

    complete = [t for t in study.trials if t.state == TrialState.COMPLETE]
    if not complete:
        print("RESULT quality=failed (rl-zoo3 finished no trial)")
        return 1
    zoo_best = study.best_trial
    zoo_hp = zoo_hyperparams(zoo_best.params)
    n_envs = int(zoo_hp.get("n_envs", 1))
    search_trials = [t for t in ours["trials"] if t.get("stage", "search") == "search"]
    last_iter = max(int(t["iterations"]) for t in search_trials)

    print(f"[3/4] our best config on {seeds} fresh seeds (tuner run, confirm)", flush=True)
    t0 = time.perf_counter()
    best_values = ours["best"]["config"]
    confirmed, _ = tuner_run(
        tmp, "confirm", confirm_spec(best_values, trials, steps, seeds, last_iter), timeout
    )
    if not confirmed.get("confirmation"):
        print("RESULT quality=failed (our confirmation run failed; see above)")
        return 1
    ours_conf = confirmed["confirmation"][0]
    seed_list = list(ours_conf["seeds"])
    ours_scores = [float("nan") if s is None else float(s) for s in ours_conf["scores"]]
    print(f"      {time.perf_counter() - t0:.1f} s, seeds {seed_list}", flush=True)

    print("[4/4] rl-zoo3's best config on the same seeds (stable-baselines3)", flush=True)
    t0 = time.perf_counter()
    if threads > 0:
        import torch

        torch.set_num_threads(threads)  # as rl_zoo3.train --num-threads does
    zoo_scores = []
    for seed in seed_list:
        zoo_scores.append(zoo_train_and_score(zoo_hp, seed, steps))
        print(f"      seed {seed}: {zoo_scores[-1]:.1f}", flush=True)
    print(f"      {time.perf_counter() - t0:.1f} s", flush=True)

    from tuner.sweep._confirm import stats

    ours_st = stats([x for x in ours_scores if math.isfinite(x)])
    zoo_st = stats(zoo_scores)

    # -- per-trial tables -----------------------------------------------------------
    print(f"\nour search trials (score: {ours['metric']}, scope mean of the last 5 iterations)")
    rows = []
    for t in sorted(search_trials, key=lambda t: t["trial_id"]):
        stopped = "median rule" if int(t["env_steps"]) < steps else ""
        rows.append([t["trial_id"], t["status"], int(t["env_steps"]), fmt(t["score"]), stopped])
    print(table(["trial", "status", "env steps", "score", "stopped early by"], rows))

    print(
        "\nrl-zoo3 search trials (value: mean of 5 deterministic episodes after "
        f"{steps // n_envs:,} steps of its {n_envs} envs, i.e. {steps:,} env steps: "
        "usually mid-rollout, before the trial's last update)"
    )
    rows = []
    for t in study.trials:
        done = t.state == TrialState.COMPLETE
        env_steps = zoo_trial_steps(t.params, steps, n_envs) if done else "—"
        rows.append([t.number, t.state.name, env_steps, fmt(t.value)])
    print(table(["trial", "state", "env steps", "value"], rows))

    ours_steps = sum(int(t["env_steps"]) for t in search_trials)
    zoo_steps = sum(
        zoo_trial_steps(t.params, steps, n_envs)
        for t in study.trials
        if t.state == TrialState.COMPLETE
    )
    stopped = sum(1 for t in search_trials if int(t["env_steps"]) < steps)
    pruned = sum(1 for t in study.trials if t.state == TrialState.PRUNED)

    # -- side by side ---------------------------------------------------------------
    print("\nside by side")
    rows = [
        ["sweep wall s (process start to end)", f"{ours_wall:.1f}", f"{zoo_wall:.1f}"],
        ["trials (stopped early / pruned)", f"{trials} ({stopped})", f"{trials} ({pruned})"],
        ["env steps, all search trials", f"{ours_steps:,}", f"{zoo_steps:,} (computed)"],
        [
            "best trial's search value",
            f"{fmt(ours['best']['metric_value'])} (train return, last-5-avg)",
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
    print("\nour best config (RLlib names; the rest RLlib's PPO defaults):")
    print("  " + json.dumps(best_values, sort_keys=True))
    print("rl-zoo3's best trial (its sampled params):")
    print("  " + json.dumps(zoo_best.params, sort_keys=True))
    print("  trained with (sb3 kwargs): " + json.dumps(zoo_hp, sort_keys=True, default=repr))

    def ratio(a: float | None, b: float | None) -> float:
        return a / b if a is not None and b else float("nan")

    wall_ratio = ours_wall / zoo_wall
    print(f"\nwall: ours {ours_wall:.1f} s / rl-zoo3 {zoo_wall:.1f} s = {wall_ratio:.2f}")
    print(ratio_line("quality.wall", wall_ratio, "<= 1.00, ours / rl-zoo3"))
    print(ratio_line("quality.mean", ratio(ours_st["mean"], zoo_st["mean"]), ">= 1.00"))
    print(ratio_line("quality.iqm", ratio(ours_st["iqm"], zoo_st["iqm"]), ">= 1.00"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
