"""Where one DQN trial's time goes, part by part, next to the same update as a plain
PyTorch loop.

Builds one trial of a `trial_ab.py` DQN case the way a sweep does (`build_config` from
the spec: every default and lean path in force), trains a warm-up of `--warmup`
iterations, then times `--iters` iterations of `algo.train()` on one core (torch threads
1, local sampling) with a clock around each part: the env runner's sampling (env steps
and the exploration pass), the replay sample (and its tensors), and the update's forward
pass, loss, backward pass, gradient clip and optimizer step. Prints each part in us per
env step and its share of the wall. Then the same update written as a plain PyTorch
loop (the module's MLP shapes and activation, a dueling head, double Q, Huber loss, the
global-norm clip, Adam; a batch drawn from tensors), timed on the same core:

    RATIO trial_profile.<algo>.update = plain loop's update / ours (the replay sample and
        the update, per update): 1.00 is a plain loop's speed

    .venv/bin/python bench/trial_profile.py [--algo dqn_lunar|dqn_zoo|dqn] [--iters 10]

Run it alone on the cores: the parts are wall-clock times (docs/benchmarks.md, "Where a
LunarLander DQN trial's time goes").
"""

from __future__ import annotations

import argparse
import collections
import copy
import functools
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trial_ab import case_spec  # noqa: E402  (bench/ is sys.path[0] for a script)

from bench._common import machine, ratio_line, timed  # noqa: E402

DQN_CASES = ("dqn_lunar", "dqn_zoo", "dqn")
# (part, what it holds), in the order printed: the update's own parts, inside "update"
OUTER = (
    ("env sampling", "env steps and the exploration pass"),
    ("replay sample", "the flat buffer's draw and its tensors"),
)
INNER = (
    ("forward", "online net on obs and next obs, target net on next obs"),
    ("loss", "TD loss and its logged stats"),
    ("backward", "gradients"),
    ("clip", "global-norm clip"),
    ("optimizer", "Adam step"),
)


def profile_trial(algo_name: str, warmup: int, iters: int) -> dict[str, Any]:
    """One trial's parts, in seconds, over `iters` timed iterations."""
    import ray
    import torch

    from tuner.rllib import _fast_replay, _lean_dqn, _transitions, build_config
    from tuner.spec import parse_spec

    torch.set_num_threads(1)
    spec = parse_spec(case_spec(algo_name))
    ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False)
    algo = build_config(spec).build_algo()
    spent: collections.Counter = collections.Counter()
    calls: collections.Counter = collections.Counter()
    modules = []

    def instrument(learner: Any) -> None:  # the local Learner, in this process
        for part, method in (
            ("loss", "compute_losses"),
            ("backward", "compute_gradients"),
            ("clip", "postprocess_gradients"),
            ("optimizer", "apply_gradients"),
        ):
            setattr(learner, method, timed(spent, part, getattr(learner, method)))
        learner.compute_losses = _count(calls, learner.compute_losses)
        modules.append(learner.module["default_policy"])

    group = algo.learner_group
    group.foreach_learner(instrument)
    _lean_dqn.dqn_forward_train = timed(spent, "forward", _lean_dqn.dqn_forward_train)
    _fast_replay.sample_env_runners = timed(spent, "env sampling", _fast_replay.sample_env_runners)
    buffer = _transitions.TransitionBuffer
    buffer.sample = timed(spent, "replay sample", buffer.sample)
    _fast_replay._as_tensors = timed(spent, "replay sample", _fast_replay._as_tensors)
    # the whole update (RLlib's bookkeeping around the parts too), either way it is called
    _fast_replay.update_unreduced = timed(spent, "update", _fast_replay.update_unreduced)
    group.update = timed(spent, "update", group.update)
    result: dict[str, Any] = {}
    for _ in range(warmup):
        result = algo.train()
    spent.clear()
    calls.clear()
    (module,) = modules
    start = result["num_env_steps_sampled_lifetime"]
    began = time.perf_counter()
    for _ in range(iters):
        result = algo.train()
    wall = time.perf_counter() - began
    steps = result["num_env_steps_sampled_lifetime"] - start
    mlp = module.encoder.net.mlp
    shapes = [(m.in_features, m.out_features) for m in mlp if hasattr(m, "weight")]
    activation = type(next(m for m in mlp if not hasattr(m, "weight")))
    info = {
        "wall": wall,
        "steps": steps,
        "updates": calls["n"],
        "spent": dict(spent),
        "layers": shapes,
        "actions": module.action_space.n,
        "activation": activation,
        "batch": algo.config.total_train_batch_size,
        "lr": algo.config.lr,
        "grad_clip": algo.config.grad_clip,
    }
    algo.stop()
    ray.shutdown()
    return info


def _count(calls: collections.Counter, fn: Any) -> Any:
    @functools.wraps(fn)
    def counted(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        return fn(*args, **kwargs)

    return counted


def plain_update_us(info: dict[str, Any], updates: int = 2000) -> float:
    """The same update as a plain PyTorch loop: us per update."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    layers: list[nn.Module] = []
    for fan_in, fan_out in info["layers"]:
        layers += [nn.Linear(fan_in, fan_out), info["activation"]()]
    width = info["layers"][-1][1]

    class Dueling(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encoder = nn.Sequential(*copy.deepcopy(layers))
            self.af, self.vf = nn.Linear(width, info["actions"]), nn.Linear(width, 1)

        def forward(self, obs: torch.Tensor) -> torch.Tensor:
            features = self.encoder(obs)
            advantages = self.af(features)
            return advantages - advantages.mean(dim=-1, keepdim=True) + self.vf(features)

    online = Dueling()
    target = copy.deepcopy(online).requires_grad_(False)
    optimizer = torch.optim.Adam(online.parameters(), lr=info["lr"])
    size, batch = 50_000, info["batch"]
    obs = torch.randn(size, info["layers"][0][0])
    next_obs, actions = torch.randn_like(obs), torch.randint(0, info["actions"], (size,))
    rewards, done = torch.randn(size), torch.zeros(size)

    def update() -> None:
        rows = torch.randint(0, size, (batch,))
        with torch.no_grad():
            best = online(next_obs[rows]).argmax(dim=-1, keepdim=True)
            value = target(next_obs[rows]).gather(-1, best).squeeze(-1)
            goal = rewards[rows] + 0.99 * (1.0 - done[rows]) * value
        q = online(obs[rows]).gather(-1, actions[rows].unsqueeze(-1)).squeeze(-1)
        loss = nn.functional.huber_loss(q, goal)
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(online.parameters(), info["grad_clip"] or 1e9)
        optimizer.step()

    for _ in range(200):
        update()
    began = time.perf_counter()
    for _ in range(updates):
        update()
    return (time.perf_counter() - began) / updates * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--algo", default="dqn_lunar", choices=DQN_CASES)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--iters", type=int, default=10)
    args = parser.parse_args()
    os.environ.setdefault("RAY_AUTH_MODE", "token")
    os.environ["RAY_ADDRESS"] = ""
    print(f"trial_profile {args.algo}: {machine()}", flush=True)
    info = profile_trial(args.algo, args.warmup, args.iters)
    steps, wall, spent = info["steps"], info["wall"], info["spent"]
    print(f"{steps:,.0f} env steps, {info['updates']:,} updates in {wall:.1f} s")
    update = spent.get("update", 0.0)
    inner = sum(spent.get(part, 0.0) for part, _ in INNER)
    rows = [
        *((part, spent.get(part, 0.0), what) for part, what in OUTER),
        ("update", update, "all of it:"),
        *((f"  {part}", spent.get(part, 0.0), what) for part, what in INNER),
        ("  bookkeeping", update - inner, "RLlib's Learner around those"),
        ("the rest", wall - update - sum(spent.get(p, 0.0) for p, _ in OUTER), "RLlib's loop"),
        ("total", wall, ""),
    ]
    print(f"{'part':15s} {'us / env step':>14s} {'share':>7s}  what")
    for part, seconds, what in rows:
        print(f"{part:15s} {seconds / steps * 1e6:14,.0f} {seconds / wall:7.1%}  {what}")
    ours = (update + spent.get("replay sample", 0.0)) / max(info["updates"], 1) * 1e6
    plain = plain_update_us(info, updates=max(info["updates"], 1000))  # as many as ours
    print(
        f"one update with its replay sample: ours {ours:,.0f} us, "
        f"the same update in a plain PyTorch loop {plain:,.0f} us"
    )
    print(ratio_line(f"trial_profile.{args.algo}.update", plain / ours, "1.00: a plain loop's"))


if __name__ == "__main__":
    main()
