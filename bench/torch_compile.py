"""What torch.compile does to one trial's speed here (#37): the same trial with
RLlib's `torch_compile_learner: true`, and with its modules compiled by hand, vs. eager,
interleaved in one run (A B B A).

    .venv/bin/python bench/torch_compile.py [--only PPO DQN SAC] [--complete-update]

Each arm builds one trial the way a sweep does (`trainable_for`, the trial's params),
trains two warm-up iterations (where the first call compiles), then times the next
ones. Arms:

- `rllib-switch`: `torch_compile_learner: true`, RLlib's default of compiling the
  RLModule's forward passes (`forward_train`, inductor). The "graphs" column counts what
  torch.compile really compiled in the trial (torch._dynamo's counter).
- `modules`: eager config, then every RLModule of the Learner compiled through RLlib's
  public `TorchRLModule.compile` (inductor): what the switch is meant to do.
- `complete_update` (`--complete-update`): RLlib compiles the whole update
  (`torch_compile_learner_what_to_compile: complete_update`); its compile time, paid
  once per trial, is in the warm-up column.

Prints env steps/s per arm and

    RATIO torch_compile_<ALGO>_<arm> = compiled / eager env steps/s (> 1: faster)

The cases are performance_defaults.py's: PPO at rl-zoo3's tuned CartPole rollout (batch
256, minibatch 64, 10 epochs, 8 iterations timed), DQN on CartPole-v1 (1,024 env steps
an iteration), SAC on Pendulum-v1 (256 env steps an iteration), [64, 64] networks.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import one_trial_spec, ratio_line, table  # noqa: E402

CASES: dict[str, dict[str, Any]] = {
    "PPO": {
        "env": "CartPole-v1",
        "config": {"train_batch_size_per_learner": 256, "minibatch_size": 64, "num_epochs": 10},
        "iterations": 8,
    },
    "DQN": {
        "env": "CartPole-v1",
        "config": {
            "train_batch_size_per_learner": 32,
            "num_steps_sampled_before_learning_starts": 0,
            "min_sample_timesteps_per_iteration": 1024,
        },
        "iterations": 2,
    },
    "SAC": {
        "env": "Pendulum-v1",
        "config": {
            "train_batch_size_per_learner": 256,
            "num_steps_sampled_before_learning_starts": 0,
            "min_sample_timesteps_per_iteration": 256,
        },
        "iterations": 2,
    },
}


def _graphs() -> int:
    """Graphs torch.compile has compiled in this process so far."""
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])


def _compile_modules(learner: Any) -> None:
    """Compiles every RLModule of a Learner through RLlib's public `compile`."""
    from ray.rllib.core.rl_module.torch.torch_compile_config import TorchCompileConfig

    for module in learner.module.values():
        module.compile(TorchCompileConfig(torch_dynamo_backend="inductor"))


def one_trial(algorithm: str, arm: str) -> dict[str, float]:
    """One trial's env steps/s after warm-up, under `arm` (see the module's doc)."""
    from tuner.rllib._config import trainable_for
    from tuner.spec import parse_spec
    from tuner.sweep._tuner import trial_params

    case = CASES[algorithm]
    config = dict(case["config"])
    if arm in ("rllib-switch", "complete_update"):
        config["torch_compile_learner"] = True
        what = "complete_update" if arm == "complete_update" else "forward_train"
        config["torch_compile_learner_what_to_compile"] = what
    spec = parse_spec(
        one_trial_spec("compile", algorithm, case["env"], config, {"num_env_runners": 0})
    )
    graphs = _graphs()
    t0 = time.perf_counter()
    algo = trainable_for(spec)(config={**trial_params(spec), "seed": 0})
    try:
        if arm == "modules":
            algo.learner_group.foreach_learner(_compile_modules)
        algo.train()  # the first update: where torch.compile traces and compiles
        algo.train()
        warm_up = time.perf_counter() - t0
        sampled = 0
        t0 = time.perf_counter()
        for _ in range(case["iterations"]):
            sampled += algo.train()["env_runners"]["num_env_steps_sampled"]
        elapsed = time.perf_counter() - t0
    finally:
        algo.stop()
    return {"steps_per_s": sampled / elapsed, "warm_up_s": warm_up, "graphs": _graphs() - graphs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", choices=list(CASES), help="algorithms")
    parser.add_argument(
        "--complete-update",
        action="store_true",
        help="also compile the whole update (minutes of compile time a trial on a CPU)",
    )
    args = parser.parse_args()
    import ray

    ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False)
    arms = ["rllib-switch", "modules"] + (["complete_update"] if args.complete_update else [])
    headers = ["algorithm", "arm", "graphs", "eager env steps/s", "arm env steps/s"]
    headers += ["arm / eager", "warm-up s (eager, arm)"]
    for algorithm in args.only or list(CASES):
        for arm in arms:
            runs: dict[str, list[dict[str, float]]] = {"eager": [], arm: []}
            for each in ("eager", arm, arm, "eager"):  # A B B A: drift hits both alike
                runs[each].append(one_trial(algorithm, each))
            eager = sum(r["steps_per_s"] for r in runs["eager"]) / 2
            compiled = sum(r["steps_per_s"] for r in runs[arm]) / 2
            warm = [sum(r["warm_up_s"] for r in runs[a]) / 2 for a in ("eager", arm)]
            graphs = max(r["graphs"] for r in runs[arm])
            row = [algorithm, arm, str(graphs), f"{eager:.1f}", f"{compiled:.1f}"]
            row += [f"{compiled / eager:.2f}", f"{warm[0]:.1f}, {warm[1]:.1f}"]
            print(table(headers, [row]), flush=True)
            print(ratio_line(f"torch_compile_{algorithm}_{arm}", compiled / eager, "> 1"))
    ray.shutdown()


if __name__ == "__main__":
    main()
