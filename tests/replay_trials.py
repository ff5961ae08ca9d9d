"""DQN and SAC trials built in the test's process on a local Ray (`ray_local`), small
enough for the flat replay path's tests: tests/integration/test_fast_replay.py and
test_lean_metrics.py."""

from __future__ import annotations

from typing import Any


def replay_trial(
    algorithm: str, config: dict[str, Any], seed: int = 0, resources: dict[str, Any] | None = None
) -> Any:
    """A DQN (CartPole-v1) or SAC (Pendulum-v1) trial: batch 16, learning from 32 env
    steps, 64 env steps an iteration, a [16] network, one env per runner; `config` and
    `resources` override. Returns the Algorithm, set up."""
    from tuner.rllib import trainable_for
    from tuner.spec import parse_spec
    from tuner.sweep import trial_params

    spec = parse_spec(
        {
            "name": f"flat-{algorithm}",
            "algorithm": algorithm,
            "env": "Pendulum-v1" if algorithm == "SAC" else "CartPole-v1",
            "config": {
                "train_batch_size_per_learner": 16,
                "num_steps_sampled_before_learning_starts": 32,
                "min_sample_timesteps_per_iteration": 64,
                **config,
            },
            "model": {"fcnet_hiddens": [16]},
            # one env: RLlib's path runs fixed updates per round, the flat path counts
            # the steps sampled; they agree exactly where rounds never overshoot
            "resources": {"num_envs_per_env_runner": 1, **(resources or {})},
        }
    )
    return trainable_for(spec)(config={**trial_params(spec), "seed": seed})
