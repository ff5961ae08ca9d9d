"""One trial of ours (`tuner run`, RLlib) vs. Stable-Baselines3, one core each.

Per algorithm (PPO and DQN on CartPole-v1, SAC on Pendulum-v1: SB3's defaults; dqn_zoo:
DQN on CartPole-v1 at rl-zoo3's tuned settings, the DQN that reaches 450 in 50k steps, for
its time to target), for each seed, in the order S O / O S (alternating, to cancel
drift):

  S  SB3: a fresh process (`vs_sb3.py --sb3-arm ...`) builds the SB3 model with its
     defaults (and our matched net) and times `model.learn(total_timesteps=N)`.
  O  ours: `python -m tuner.cli run SPEC --output json --data-dir DIR` in a fresh
     process, as a user runs it (local Ray, MLflow tracking, a checkpoint at the
     end): one trial, num_env_runners 0. Its own time is Tune's `time_total_s` from
     the trial's result.json (under the summary's `path`); the command's wall time
     (imports, Ray start, MLflow set-up, checkpoint, shutdown) is shown beside it.

Both sides: torch threads 1 (SB3: torch.set_num_threads(1); ours: OMP_NUM_THREADS=1,
which Ray's trial actor and torch inherit), the same env steps, the same batch size
and update ratio (samples trained per env step). The realized ratio is read from
each side's own counters and printed beside the other's.

    RATIO vs_sb3.<algo>.throughput     = mean env steps/s (ours, trial time) / (SB3, learn())
        (printed with each seed pair's ratio and a 95 % bootstrap CI over the pairs)
    RATIO vs_sb3.<algo>.time_to_target = mean time to target, ours / SB3 (lower is better)

Time to target: the first moment the mean return of the last 10 finished episodes
is >= 450 (CartPole) / -250 (Pendulum). SB3: checked after every episode (Monitor's
`info["episode"]`), time since `learn()` began. Ours: checked at the end of every
training iteration (`metrics_num_episodes_for_smoothing: 10`, so each iteration
reports the mean of its own last <= 10 episodes; older iterations fill the window
back to 10 episodes, weighted by their episode counts), time = that iteration's
`time_total_s`: an upper bound, late by up to one iteration.

    .venv/bin/python bench/vs_sb3.py [--quick] [--algos ppo,dqn,dqn_zoo,sac] [--seeds 3]
        [--seed-start 0] [--keep]
    .venv/bin/python bench/vs_sb3.py --sb3-envs 8 --seeds 5    # every row from one run

`--together` runs each seed pair's two arms at the same time instead, one core each, so
that both face the same phase of the machine (on this 2-core VM, iteration times of the
same code swing by up to 2x over minutes); ours then starts Ray while SB3 already
learns, which slows SB3's first seconds, and the background of Ray (driver, raylet,
dashboard agent: ~8 % of a core together) shares the cores with both.

Our PPO and DQN trials step 8 vectorised envs by default (tuner/algorithms/
algorithms.yaml); SB3's own default is one env. `--sb3-envs 8` gives SB3's PPO the same
layout (its 2048-step rollout from 8 envs of 256 steps), for the comparison at equal
sampling on both sides; in a run of several algorithms it applies to PPO's row only.

Needs the optional `bench` extra (stable-baselines3); without it, says how to install
it and exits 0.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import importlib.util
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections import deque
from pathlib import Path
from typing import Any

from _common import run_timed, table

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
WORKER_NICENESS = int(os.environ.get("RAY_worker_niceness", "15"))  # Ray's default: 15
WINDOW = 10  # episodes in the "mean return of the last N episodes" of time to target

# DQN settings of SB3's that both DQN cases (its defaults, rl-zoo3's) share, and their rows
DQN_COMMON: dict[str, Any] = {
    "tau": 1.0,
    "gamma": 0.99,
    "grad_clip": 10.0,
    "grad_clip_by": "global_norm",
    "double_q": False,
    "dueling": False,
    "n_step": 1,
    "td_error_loss_fn": "huber",
    "adam_epsilon": 1e-8,
}
DQN_COMMON_ROWS = [
    ("loss / grad clip", "smooth L1, max_grad_norm=10", "td_error_loss_fn=huber, grad_clip=10"),
    ("variant", "vanilla DQN", "double_q=False dueling=False n_step=1"),
]

# Each algorithm: SB3's defaults (stable_baselines3 2.x, checked against its source) and
# the RLlib 2.60 settings that match them. `steps`/`quick_steps`: env steps per run.
ALGOS: dict[str, dict[str, Any]] = {
    "ppo": {
        "name": "PPO",
        "env": "CartPole-v1",
        "target": 450.0,
        "steps": 100_352,  # 49 rollouts of 2048
        "quick_steps": 4_096,
        "sb3": {},  # all SB3 defaults; net [64, 64] tanh, separate pi / vf, is SB3's default
        "batch": 2048,
        "config": {
            "train_batch_size_per_learner": 2048,
            "minibatch_size": 64,
            "num_epochs": 10,
            "lr": 3e-4,
            "gamma": 0.99,
            "lambda": 0.95,
            "clip_param": 0.2,
            "entropy_coeff": 0.0,
            "vf_loss_coeff": 0.5,
            "grad_clip": 0.5,
            "grad_clip_by": "global_norm",
            "use_kl_loss": False,
            "vf_clip_param": 1.0e9,  # SB3's clip_range_vf=None: no value clipping
        },
        "model": {"fcnet_hiddens": [64, 64], "fcnet_activation": "tanh"},
        "matched": [
            ("rollout / train batch", "n_steps=2048", "train_batch_size_per_learner=2048"),
            ("minibatch", "batch_size=64", "minibatch_size=64"),
            ("epochs", "n_epochs=10", "num_epochs=10"),
            ("learning rate", "learning_rate=3e-4", "lr=3e-4"),
            ("discount / GAE", "gamma=0.99 gae_lambda=0.95", "gamma=0.99 lambda=0.95"),
            ("clip", "clip_range=0.2 clip_range_vf=None", "clip_param=0.2 vf_clip_param=1e9"),
            (
                "entropy / value coef",
                "ent_coef=0.0 vf_coef=0.5",
                "entropy_coeff=0 vf_loss_coeff=0.5",
            ),
            ("grad clip", "max_grad_norm=0.5", "grad_clip=0.5 (global_norm)"),
            ("KL penalty", "none (target_kl=None)", "use_kl_loss=False"),
            ("net", "pi/vf [64,64] tanh", "fcnet_hiddens=[64,64] tanh"),
        ],
        "unmatched": "SB3 inits orthogonally, normalizes advantages per minibatch and uses Adam "
        "eps 1e-5; RLlib: torch default init, advantages standardized per train batch, "
        "Adam eps 1e-8 (none of these is an RLlib setting).",
    },
    "dqn": {
        "name": "DQN",
        "env": "CartPole-v1",
        "target": 450.0,
        "steps": 50_000,
        "quick_steps": 2_000,
        "sb3": {},  # all SB3 defaults; net [64, 64] relu is SB3's default
        "exploration": (0.1, 0.05),  # SB3's exploration_fraction, exploration_final_eps
        "batch": 32,
        "learning_starts": 100,
        "config": {
            "lr": 1e-4,
            "train_batch_size_per_learner": 32,
            "training_intensity": 8,  # replayed / sampled: 32 samples per 4 env steps
            "num_steps_sampled_before_learning_starts": 100,
            "replay_buffer_config": {"type": "EpisodeReplayBuffer", "capacity": 1_000_000},
            "target_network_update_freq": 10_000,
            **DQN_COMMON,
            # "epsilon" is set from the budget: SB3 decays over exploration_fraction
        },
        "model": {"fcnet_hiddens": [64, 64], "fcnet_activation": "relu"},
        "matched": [
            ("batch", "batch_size=32", "train_batch_size_per_learner=32"),
            (
                "update ratio",
                "train_freq=4 gradient_steps=1 (32/4=8)",
                "training_intensity=8 (flat_replay_defaults: 8 envs x fragment 4 = 32 env "
                "steps, then 8 updates; counted from the steps really sampled)",
            ),
            (
                "learning starts",
                "learning_starts=100",
                "num_steps_sampled_before_learning_starts=100",
            ),
            ("buffer", "buffer_size=1e6 uniform", "EpisodeReplayBuffer capacity=1e6 (uniform)"),
            (
                "target net",
                "target_update_interval=10000 tau=1",
                "target_network_update_freq=10000 tau=1",
            ),
            (
                "exploration",
                "eps 1.0 -> 0.05 over exploration_fraction=0.1 of the steps",
                "epsilon=[[0,1.0],[0.1*steps,0.05]]",
            ),
            ("learning rate / gamma", "learning_rate=1e-4 gamma=0.99", "lr=1e-4 gamma=0.99"),
            *DQN_COMMON_ROWS,
            ("net", "[64,64] relu", "fcnet_hiddens=[64,64] relu, no extra head layer"),
        ],
        "unmatched": "Init differs (torch default on both, different layer code); SB3 samples "
        "transitions, RLlib's EpisodeReplayBuffer samples episodes then timesteps.",
    },
    # SB3's default DQN reaches 450 on CartPole in 50k steps on neither side, so time to
    # target is measured at rl-zoo3's tuned CartPole-v1 DQN (rl_zoo3/hyperparams/dqn.yml)
    "dqn_zoo": {
        "name": "DQN",
        "env": "CartPole-v1",
        "target": 450.0,
        "steps": 50_000,
        "quick_steps": 2_048,
        "sb3": {
            "learning_rate": 2.3e-3,
            "batch_size": 64,
            "buffer_size": 100_000,
            "learning_starts": 1000,
            "gamma": 0.99,
            "target_update_interval": 10,
            "train_freq": 256,
            "gradient_steps": 128,
            "exploration_fraction": 0.16,
            "exploration_final_eps": 0.04,
            "policy_kwargs": {"net_arch": [256, 256]},
        },
        "exploration": (0.16, 0.04),
        "batch": 64,
        "learning_starts": 1000,
        "config": {
            "lr": 2.3e-3,
            "train_batch_size_per_learner": 64,
            "training_intensity": 32,  # 128 updates of 64 per 256 env steps
            "rollout_fragment_length": 32,  # x 8 envs = 256 env steps a round, as train_freq
            "num_steps_sampled_before_learning_starts": 1000,
            "replay_buffer_config": {"type": "EpisodeReplayBuffer", "capacity": 100_000},
            "target_network_update_freq": 10,
            **DQN_COMMON,
        },
        "resources": {"num_envs_per_env_runner": 8},
        "model": {"fcnet_hiddens": [256, 256], "fcnet_activation": "relu"},
        "matched": [
            ("batch", "batch_size=64", "train_batch_size_per_learner=64"),
            (
                "update ratio / rhythm",
                "train_freq=256 gradient_steps=128 (64x128/256=32)",
                "training_intensity=32, rollout_fragment_length=32 x 8 envs: 256 env steps, "
                "then 128 updates",
            ),
            (
                "learning starts",
                "learning_starts=1000",
                "num_steps_sampled_before_learning_starts=1000",
            ),
            ("buffer", "buffer_size=1e5 uniform", "EpisodeReplayBuffer capacity=1e5 (uniform)"),
            (
                "target net",
                "target_update_interval=10 tau=1 (synced while collecting: once a burst)",
                "target_network_update_freq=10 tau=1 (synced after a round's first update)",
            ),
            (
                "exploration",
                "eps 1.0 -> 0.04 over exploration_fraction=0.16 of the steps",
                "epsilon=[[0,1.0],[0.16*steps,0.04]]",
            ),
            ("learning rate / gamma", "learning_rate=2.3e-3 gamma=0.99", "lr=2.3e-3 gamma=0.99"),
            *DQN_COMMON_ROWS,
            ("net", "[256,256] relu", "fcnet_hiddens=[256,256] relu, no extra head layer"),
        ],
        "unmatched": "rl-zoo3's tuned settings, not SB3's defaults. SB3 samples 1 env, ours 8 "
        "envs x 32 steps a round (same 256). Init differs (torch default on both, different "
        "layer code); SB3 samples transitions, RLlib's EpisodeReplayBuffer samples episodes "
        "then timesteps.",
    },
    "sac": {
        "name": "SAC",
        "env": "Pendulum-v1",
        "target": -250.0,
        "steps": 10_000,
        "quick_steps": 600,
        "sb3": {},  # all SB3 defaults; net [256, 256] relu is SB3's default
        "batch": 256,
        "learning_starts": 100,
        "config": {
            "actor_lr": 3e-4,
            "critic_lr": 3e-4,
            "alpha_lr": 3e-4,
            "train_batch_size_per_learner": 256,
            "training_intensity": 256,  # one update of 256 per env step
            "num_steps_sampled_before_learning_starts": 100,
            "replay_buffer_config": {"type": "EpisodeReplayBuffer", "capacity": 1_000_000},
            "tau": 0.005,
            "gamma": 0.99,
            "initial_alpha": 1.0,
            "target_entropy": "auto",
            "twin_q": True,
            "n_step": 1,
            "target_network_update_freq": 0,  # every update, as SB3's target_update_interval=1
        },
        # RLlib 2.60's SAC Q-net is a multi-stream encoder (obs and action encoded apart,
        # concatenated, then fused): 465k params at its closest to SB3's 202k. Our
        # `q_encoder: concat` (tuner/rllib/_sac_model.py) builds SB3's networks exactly:
        # the policy 3 -> 256 -> 256 -> 2, each Q (3 + 1) -> 256 -> 256 -> 1.
        "model": {
            "fcnet_hiddens": [256, 256],
            "fcnet_activation": "relu",
            "head_fcnet_hiddens": [],
            "q_encoder": "concat",
        },
        "matched": [
            ("batch", "batch_size=256", "train_batch_size_per_learner=256"),
            (
                "update ratio",
                "train_freq=1 gradient_steps=1 (256/1=256)",
                "training_intensity=256 (rollout_fragment_length auto=1 -> 1 sample : 1 update)",
            ),
            (
                "learning starts",
                "learning_starts=100",
                "num_steps_sampled_before_learning_starts=100",
            ),
            ("buffer", "buffer_size=1e6 uniform", "EpisodeReplayBuffer capacity=1e6 (uniform)"),
            ("target net", "tau=0.005 every step", "tau=0.005 target_network_update_freq=0"),
            ("learning rates", "learning_rate=3e-4 (all)", "actor_lr=critic_lr=alpha_lr=3e-4"),
            (
                "entropy",
                "ent_coef=auto (init 1.0), target -dim(A)",
                "initial_alpha=1.0 target_entropy=auto",
            ),
            ("gamma / critics", "gamma=0.99, 2 critics", "gamma=0.99 twin_q=True"),
            (
                "net",
                "pi 3-256-256-2, each Q 4-256-256-1, relu",
                "the same (fcnet_hiddens=[256,256] head_fcnet_hiddens=[] "
                "q_encoder=concat: 201,988 params, as SB3's), relu",
            ),
        ],
        "unmatched": "Init differs (torch default on both, different layer code). Before "
        "learning starts SB3 acts uniformly at random, RLlib samples its (untrained) policy.",
    },
}


# -- helpers ------------------------------------------------------------------------


def mean(values: list[float]) -> float:
    values = [v for v in values if v is not None and not math.isnan(v)]
    return statistics.fmean(values) if values else float("nan")


def ratio_interval(pairs: list[tuple[float, float]], draws: int = 10_000) -> tuple[float, float]:
    """95 % bootstrap CI of mean(ours) / mean(SB3) over seed pairs (resampled as pairs, the
    two arms of a seed ran side by side in time).

    Args:
        pairs: (ours, SB3) env steps per second, one pair per seed.
        draws: Bootstrap resamples.

    Returns:
        The 2.5 and 97.5 percentiles (the ratio itself twice for one pair).
    """
    import numpy as np

    ours, sb3 = np.array(pairs, dtype=float).T
    picks = np.random.default_rng(0).integers(0, len(pairs), size=(draws, len(pairs)))
    ratios = ours[picks].mean(axis=1) / sb3[picks].mean(axis=1)
    return float(np.percentile(ratios, 2.5)), float(np.percentile(ratios, 97.5))


def fmt(value: float | None, digits: int = 1) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:,.{digits}f}"


def one_thread_env() -> dict[str, str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    # this checkout's tuner, whatever the venv has installed
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    for key in ("TUNER_MLFLOW_TRACKING_URI", "TUNER_RAY_ADDRESS", "TUNER_STORAGE_PATH"):
        env.pop(key, None)  # the embedded defaults, under the run's own data dir
    return env


def run_process(cmd: list[str], out: Path, timeout: float) -> tuple[int, float]:
    """Runs cmd in its own process group (stdout to `out`, stderr to `out`.err);
    returns (exit code, wall seconds). Kills the group afterwards (Ray leftovers)."""
    err = out.with_suffix(".err")
    err.write_bytes(b"")
    return run_timed(cmd, one_thread_env(), err, timeout, stdout=out)


# -- SB3 arm (runs in its own process) ------------------------------------------------


def sb3_arm(algo: str, seed: int, steps: int, out: Path, envs: int = 1) -> None:
    # Ray runs every worker, our trial actor included, at niceness 15
    # (RAY_worker_niceness); SB3 gets the same, so other load on the machine takes
    # the same share from both training loops.
    os.nice(max(0, WORKER_NICENESS - os.nice(0)))
    import torch

    torch.set_num_threads(1)
    import gymnasium as gym
    import stable_baselines3 as sb3
    from stable_baselines3.common.callbacks import BaseCallback

    spec = ALGOS[algo]

    class TimeToTarget(BaseCallback):
        def __init__(self, t0: list[float]) -> None:
            super().__init__()
            self.t0 = t0
            self.returns: deque[float] = deque(maxlen=WINDOW)
            self.episodes = 0
            self.reached: dict[str, float] | None = None

        def _on_step(self) -> bool:
            for info in self.locals.get("infos", []):
                if "episode" in info:
                    self.returns.append(float(info["episode"]["r"]))
                    self.episodes += 1
                    if (
                        self.reached is None
                        and len(self.returns) == WINDOW
                        and statistics.fmean(self.returns) >= spec["target"]
                    ):
                        self.reached = {
                            "time_s": time.perf_counter() - self.t0[0],
                            "env_steps": self.num_timesteps,
                        }
            return True

    cls = getattr(sb3, spec["name"])
    kwargs = dict(spec["sb3"])
    env: Any = gym.make(spec["env"])
    if envs > 1:  # PPO only (main): the same rollout batch from `envs` envs side by side
        from stable_baselines3.common.env_util import make_vec_env

        env = make_vec_env(spec["env"], n_envs=envs, seed=seed)
        kwargs["n_steps"] = spec["batch"] // envs
    model = cls("MlpPolicy", env, seed=seed, device="cpu", **kwargs)
    t0 = [0.0]
    cb = TimeToTarget(t0)
    t0[0] = time.perf_counter()
    model.learn(total_timesteps=steps, callback=cb)
    learn_s = time.perf_counter() - t0[0]
    batch = spec["batch"]
    # samples that went through a gradient step: PPO counts epochs in _n_updates
    # (n_epochs per rollout of n_steps), DQN / SAC count gradient steps (of batch_size)
    trained = model._n_updates * batch
    out.write_text(
        json.dumps(
            {
                "learn_s": learn_s,
                "env_steps": int(model.num_timesteps),
                "trained": int(trained),
                "updates": int(model._n_updates),
                "episodes": cb.episodes,
                "last_mean": statistics.fmean(cb.returns) if cb.returns else None,
                "reached": cb.reached,
                "torch_threads": torch.get_num_threads(),
                "niceness": os.nice(0),
                "sb3_version": sb3.__version__,
            }
        )
    )


def run_sb3(algo: str, seed: int, steps: int, tmp: Path, envs: int = 1) -> dict[str, Any]:
    out = tmp / f"sb3-{algo}-{seed}.json"
    log = tmp / f"sb3-{algo}-{seed}.log"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--sb3-arm", algo]
    cmd += ["--seed", str(seed), "--steps", str(steps), "--arm-out", str(out)]
    cmd += ["--sb3-envs", str(envs)]
    rc, wall = run_process(cmd, log, timeout=6 * 3600)
    if rc != 0 or not out.exists():
        tail = log.with_suffix(".err").read_text(errors="replace")[-2000:]
        raise RuntimeError(f"SB3 {algo} seed {seed} failed (exit {rc}):\n{tail}")
    res = json.loads(out.read_text())
    res["wall_s"] = wall
    return res


# -- our arm: `tuner run` -----------------------------------------------------------------


def our_spec(algo: str, seed: int, steps: int) -> dict[str, Any]:
    spec = ALGOS[algo]
    config = dict(spec["config"])
    if "exploration" in spec:  # SB3 decays epsilon linearly over a fraction of the steps
        fraction, final = spec["exploration"]
        config["epsilon"] = [[0, 1.0], [max(1, int(fraction * steps)), final]]
    # a reporting setting only: episode_return_mean = mean of the iteration's last 10
    config["metrics_num_episodes_for_smoothing"] = WINDOW
    return {
        "name": f"vs-sb3-{algo}-s{seed}",
        "algorithm": spec["name"],
        "env": spec["env"],
        "config": config,
        "model": spec["model"],
        "search": {"method": "grid", "space": {}},  # one trial, nothing sampled
        "stop": {"timesteps_total": steps},
        "resources": {"num_env_runners": 0, **spec.get("resources", {})},
        "seed": seed,  # trial 0 runs with the spec's seed
    }


def read_results(path: str) -> list[dict[str, Any]]:
    """The per-iteration results of the sweep's only trial (Tune's result.json)."""
    files = sorted(Path(path).glob("*/result.json"))
    if len(files) != 1:
        raise RuntimeError(f"expected one trial's result.json under {path}, found {files}")
    return [json.loads(line) for line in files[0].read_text().splitlines() if line.strip()]


def get(result: dict[str, Any], key: str) -> Any:
    node: Any = result
    for part in key.split("/"):
        node = node.get(part) if isinstance(node, dict) else None
    return node


def window_means(results: list[dict[str, Any]]) -> list[float | None]:
    """Per iteration, the mean return of the last 10 episodes finished by its end (None
    until 10 have finished).

    Iteration i finished n_i episodes (difference of env_runners/num_episodes_lifetime)
    and reports the mean of its last min(n_i, 10) (episode_return_mean with
    metrics_num_episodes_for_smoothing 10; RLlib 2.60 does not carry that window over
    iterations); older iterations fill the window back to 10 episodes, each weighted by
    the episodes it stands for (exact but for the oldest one, whose mean stands in for
    its last few episodes)."""
    out: list[float | None] = []
    history: list[tuple[int, float]] = []  # (episodes it stands for, their mean)
    done_before = 0
    for r in results:
        lifetime = int(get(r, "env_runners/num_episodes_lifetime") or 0)
        n = lifetime - done_before
        done_before = lifetime
        m = get(r, "env_runners/episode_return_mean")
        if n > 0 and m is not None and not math.isnan(m):
            history.append((min(n, WINDOW), float(m)))
        need, total = WINDOW, 0.0
        for count, m_j in reversed(history):
            take = min(count, need)
            total += take * m_j
            need -= take
            if need == 0:
                break
        out.append(total / WINDOW if need == 0 else None)
    return out


def our_time_to_target(results: list[dict[str, Any]], target: float) -> dict[str, float] | None:
    """The end of the first iteration whose last-10-episodes mean >= target."""
    for r, m in zip(results, window_means(results), strict=True):
        if m is not None and m >= target:
            return {
                "time_s": float(r["time_total_s"]),
                "env_steps": int(get(r, "env_runners/num_env_steps_sampled_lifetime") or 0),
                "iteration": int(r["training_iteration"]),
            }
    return None


def run_ours(algo: str, seed: int, steps: int, tmp: Path) -> dict[str, Any]:
    spec_file = tmp / f"ours-{algo}-{seed}.json"
    spec_file.write_text(json.dumps(our_spec(algo, seed, steps), indent=2))
    out = tmp / f"ours-{algo}-{seed}.out"
    cmd = [sys.executable, "-m", "tuner.cli", "run", str(spec_file), "--output", "json"]
    cmd += ["--data-dir", str(tmp / f"data-{algo}-{seed}")]
    rc, wall = run_process(cmd, out, timeout=6 * 3600)
    try:
        summary = json.loads(out.read_text())
    except ValueError:
        summary = {}
    if rc != 0 or not summary.get("path"):
        tail = out.with_suffix(".err").read_text(errors="replace")[-3000:]
        raise RuntimeError(f"tuner run {algo} seed {seed} failed (exit {rc}):\n{tail}")
    trial = summary["trials"][0]
    if trial.get("status") != "TERMINATED":
        raise RuntimeError(f"{algo} seed {seed}: trial {trial.get('status')}: {trial.get('error')}")
    results = read_results(summary["path"])
    last = results[-1]
    sampled = int(get(last, "env_runners/num_env_steps_sampled_lifetime") or 0)
    # rows that went through a gradient step, as RLlib's learner counts them
    trained = get(last, "learners/__all_modules__/num_module_steps_trained_lifetime") or 0
    # PPO's learner connector adds one masked row per episode chunk (to bootstrap the
    # value); in/out of the learner connector say how many rows were real env steps
    real = 0.0
    for r in results:
        n = get(r, "learners/__all_modules__/num_module_steps_trained") or 0
        rows_in = get(r, "learners/__all_modules__/learner_connector_sum_episodes_length_in")
        rows_out = get(r, "learners/__all_modules__/learner_connector_sum_episodes_length_out")
        real += n * (rows_in / rows_out if rows_in and rows_out else 1.0)
    returns = [get(r, "env_runners/episode_return_mean") for r in results]
    returns = [x for x in returns if x is not None and not math.isnan(x)]
    return {
        "replay": (last.get("tuner") or {}).get("replay") or "-",
        "trial_s": float(last["time_total_s"]),
        "wall_s": wall,
        "env_steps": sampled,
        "trial_env_steps": int(trial.get("env_steps") or 0),
        "trained": int(trained),
        "trained_real": real,
        "iterations": int(last["training_iteration"]),
        "last_mean": returns[-1] if returns else None,
        "reached": our_time_to_target(results, ALGOS[algo]["target"]),
    }


# -- report ---------------------------------------------------------------------------


def report(
    algo: str, steps: int, sb3: list[dict[str, Any]], ours: list[dict[str, Any]], sb3_envs: int = 1
) -> None:
    spec = ALGOS[algo]
    learning_starts = spec.get("learning_starts", 0)
    title = f"{spec['name']} on {spec['env']}" + (
        f", SB3 on {sb3_envs} envs" if sb3_envs > 1 else ""
    )
    print(f"\n--- {title}: {len(sb3)} seed(s), {steps:,} env steps each ---")
    print("matched settings (SB3 default -> RLlib 2.60 setting):")
    print(table(["what", "SB3", "ours (RLlib)"], [list(m) for m in spec["matched"]], "left"))
    print(f"not matched: {spec['unmatched']}")
    rows = []
    for i, (s, o) in enumerate(zip(sb3, ours, strict=True)):
        rows.append(
            [
                f"seed {s.get('seed', i)}",
                f"{s['env_steps']:,}",
                f"{o['env_steps']:,}",
                fmt(s["learn_s"]),
                fmt(o["trial_s"]),
                fmt(o["wall_s"]),
                fmt(s["env_steps"] / s["learn_s"], 0),
                fmt(o["env_steps"] / o["trial_s"], 0),
                fmt(o["env_steps"] / o["wall_s"], 0),
                fmt((s["reached"] or {}).get("time_s")),
                fmt((o["reached"] or {}).get("time_s")),
                fmt(s["last_mean"]),
                fmt(o["last_mean"]),
            ]
        )
    headers = [
        "",
        "SB3 steps",
        "our steps",
        "SB3 learn s",
        "our trial s",
        "our cmd s",
        "SB3 st/s",
        "our st/s",
        "our cmd st/s",
        "SB3 ttt s",
        "our ttt s",
        "SB3 last ret",
        "our last ret",
    ]
    print(table(headers, rows, "left"))
    sb3_tp = mean([s["env_steps"] / s["learn_s"] for s in sb3])
    our_tp = mean([o["env_steps"] / o["trial_s"] for o in ours])
    our_wall_tp = mean([o["env_steps"] / o["wall_s"] for o in ours])
    sb3_wall_tp = mean([s["env_steps"] / s["wall_s"] for s in sb3])
    print(
        f"env steps/s: SB3 {sb3_tp:,.0f} (learn()), ours {our_tp:,.0f} (trial time_total_s), "
        f"ratio ours/SB3 {our_tp / sb3_tp:.2f}"
    )
    pairs = [
        (o["env_steps"] / o["trial_s"], s["env_steps"] / s["learn_s"])
        for s, o in zip(sb3, ours, strict=True)
    ]
    low, high = ratio_interval(pairs)
    print(
        f"  per seed pair: {', '.join(f'{o / s:.2f}' for o, s in pairs)}; 95 % bootstrap CI of "
        f"the ratio over seed pairs: [{low:.2f}, {high:.2f}] (how far this machine's drift "
        "moves it)"
    )
    print(
        f"  whole process: SB3 {sb3_wall_tp:,.0f} (imports + learn), ours {our_wall_tp:,.0f} "
        f"(`tuner run`: Ray start, MLflow, checkpoint; mean {mean([o['wall_s'] for o in ours]):.1f}"
        f" s vs trial {mean([o['trial_s'] for o in ours]):.1f} s), ratio "
        f"{our_wall_tp / sb3_wall_tp:.2f}"
    )
    s_hit = [s["reached"] for s in sb3 if s["reached"]]
    o_hit = [o["reached"] for o in ours if o["reached"]]
    s_ttt = mean([h["time_s"] for h in s_hit])
    o_ttt = mean([h["time_s"] for h in o_hit])
    print(
        f"time to target (mean of last {WINDOW} episodes >= {spec['target']:g}): "
        f"SB3 {fmt(s_ttt)} s ({len(s_hit)}/{len(sb3)} seeds reached, at "
        f"{fmt(mean([h['env_steps'] for h in s_hit]), 0)} steps), ours {fmt(o_ttt)} s "
        f"({len(o_hit)}/{len(ours)} reached, at {fmt(mean([h['env_steps'] for h in o_hit]), 0)}"
        " steps; at iteration ends)"
    )
    s_ratio = mean([s["trained"] / s["env_steps"] for s in sb3])
    o_raw = mean([o["trained"] / o["env_steps"] for o in ours])
    o_ratio = mean([o["trained_real"] / o["env_steps"] for o in ours])
    print(
        f"update ratio (samples trained / env steps sampled): SB3 {s_ratio:.2f} "
        f"(_n_updates x {spec['batch']} / num_timesteps), ours {o_ratio:.2f} "
        "(learners/__all_modules__/num_module_steps_trained_lifetime / "
        "env_runners/num_env_steps_sampled_lifetime"
        + (
            f"; {o_raw:.2f} raw: the counter includes the one masked bootstrap row per "
            "episode chunk that PPO's learner connector adds, taken out with "
            "learner_connector_sum_episodes_length_in/_out"
            if abs(o_raw - o_ratio) > 0.005
            else ""
        )
        + ")"
    )
    if learning_starts:
        s_post = mean([s["trained"] / (s["env_steps"] - learning_starts) for s in sb3])
        o_post = mean([o["trained_real"] / (o["env_steps"] - learning_starts) for o in ours])
        print(
            f"  after learning starts ({learning_starts} steps): "
            f"SB3 {s_post:.2f}, ours {o_post:.2f}"
        )
    print(f"our iterations per run: {mean([o['iterations'] for o in ours]):.0f}")
    paths = sorted({o["replay"] for o in ours})
    print(f"our replay path (tuner/rllib/_fast_replay.py): {', '.join(paths)}")
    print(
        f"RATIO vs_sb3.{algo}.throughput={our_tp / sb3_tp:.2f} "
        "(ours/SB3 env steps/s, trial time vs learn(); higher is better)"
    )
    print(
        f"RATIO vs_sb3.{algo}.throughput_cmd={our_wall_tp / sb3_wall_tp:.2f} "
        "(ours/SB3, whole `tuner run` vs whole SB3 process)"
    )
    if s_hit and o_hit:
        print(
            f"RATIO vs_sb3.{algo}.time_to_target={o_ttt / s_ttt:.2f} "
            f"(ours/SB3 seconds, seeds that reached: {len(o_hit)} / {len(s_hit)}; lower is better)"
        )
    else:
        print(
            f"RESULT vs_sb3.{algo}.time_to_target=n/a (reached: SB3 {len(s_hit)}/{len(sb3)}, "
            f"ours {len(o_hit)}/{len(ours)})"
        )
    print(f"RESULT vs_sb3.{algo}.update_ratio={o_ratio:.2f} (SB3 {s_ratio:.2f})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny budgets, 1 seed (a smoke run)")
    parser.add_argument(
        "--algos", default=",".join(ALGOS), help=f"comma-separated: {','.join(ALGOS)}"
    )
    parser.add_argument("--seeds", type=int, default=None, help="seeds 0..N-1 (default 3)")
    parser.add_argument(
        "--seed-start", type=int, default=0, help="first seed (more seeds for a case: 3 runs 3..)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary data dir")
    parser.add_argument(
        "--sb3-envs",
        type=int,
        default=1,
        help="PPO's row: SB3 samples its 2048-step rollout from N envs side by side "
        "(n_steps 2048/N), as our trials' default of 8 does (default 1: SB3's own default); "
        "the other rows keep SB3's one env",
    )
    parser.add_argument(
        "--together",
        action="store_true",
        help="each seed pair's two arms at the same time, one core each (both face the "
        "same machine phase; default: one after the other, alternating the order)",
    )
    parser.add_argument("--sb3-arm", help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--steps", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--arm-out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.sb3_arm:
        sb3_arm(args.sb3_arm, args.seed, args.steps, Path(args.arm_out), args.sb3_envs)
        return 0
    if importlib.util.find_spec("stable_baselines3") is None:
        print(
            "vs_sb3: skipped, stable-baselines3 is not installed. Install the optional "
            "`bench` extra:\n  .venv/bin/pip install -c constraints.txt -e '.[bench]'"
            "\n(or: .venv/bin/pip install -c constraints.txt 'stable-baselines3>=2.3')"
        )
        print("RESULT vs_sb3=skipped (stable-baselines3 not installed)")
        return 0
    algos = [a.strip().lower() for a in args.algos.split(",") if a.strip()]
    unknown = [a for a in algos if a not in ALGOS]
    if unknown:
        parser.error(f"--algos: unknown {unknown}; choose from {','.join(ALGOS)}")
    if args.sb3_envs < 1 or ALGOS["ppo"]["batch"] % args.sb3_envs:
        parser.error(
            f"--sb3-envs {args.sb3_envs}: a divisor of {ALGOS['ppo']['batch']} "
            "(the rollout batch stays SB3's)"
        )
    seeds = args.seeds or (1 if args.quick else 3)
    tmp = Path(tempfile.mkdtemp(prefix="vs-sb3-"))
    print(
        f"vs_sb3: {', '.join(algos)}; {seeds} seed(s){' (quick)' if args.quick else ''}; "
        f"one trial / one process each, torch threads 1, niceness {WORKER_NICENESS} (Ray's "
        f"worker niceness) on both; SB3's PPO envs {args.sb3_envs}; data in {tmp}"
    )
    try:
        for algo in algos:
            steps = ALGOS[algo]["quick_steps" if args.quick else "steps"]
            envs = args.sb3_envs if algo == "ppo" else 1  # --sb3-envs: PPO's row only
            sb3_runs, our_runs = [], []
            for seed in range(args.seed_start, args.seed_start + seeds):
                if args.together:  # both arms at once, one core each: the same machine phase
                    t0 = time.perf_counter()
                    with concurrent.futures.ThreadPoolExecutor(2) as pool:
                        sb3_f = pool.submit(run_sb3, algo, seed, steps, tmp, envs)
                        ours_f = pool.submit(run_ours, algo, seed, steps, tmp)
                        sb3_runs.append({**sb3_f.result(), "seed": seed})
                        our_runs.append({**ours_f.result(), "seed": seed})
                    print(
                        f"  {algo} seed {seed} both at once: {time.perf_counter() - t0:.1f} s",
                        flush=True,
                    )
                    continue
                arms = ["sb3", "ours"] if seed % 2 == 0 else ["ours", "sb3"]
                for arm in arms:
                    t0 = time.perf_counter()
                    if arm == "sb3":
                        sb3_runs.append(run_sb3(algo, seed, steps, tmp, envs))
                    else:
                        our_runs.append(run_ours(algo, seed, steps, tmp))
                    (sb3_runs if arm == "sb3" else our_runs)[-1]["seed"] = seed
                    print(
                        f"  {algo} seed {seed} {arm}: {time.perf_counter() - t0:.1f} s", flush=True
                    )
            report(algo, steps, sb3_runs, our_runs, envs)
            sys.stdout.flush()
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
