"""The CPU a trial names (`tuner.cpu`) where its Learner is a remote actor: the Learner's
process is asked, on the trial's own machine it is the trial's description, once, and a
Learner that describes its CPU otherwise is named beside the trial's."""

from __future__ import annotations

import gymnasium as gym

from tuner.rllib import _machine, build_config
from tuner.rllib._machine import cpu_description
from tuner.rllib._trainables import _trial_cpu
from tuner.spec import parse_spec


def test_a_remote_learner_on_this_machine_is_described_once(ray_local, monkeypatch):
    spec = parse_spec(
        {
            "name": "cpu",
            "algorithm": "PPO",
            "env": "CartPole-v1",
            "config": {"train_batch_size_per_learner": 128, "minibatch_size": 64},
            "resources": {"num_env_runners": 0, "num_learners": 1},
        }
    )
    group = build_config(spec).build_learner_group(env=gym.make("CartPole-v1"))
    try:
        assert not group.is_local
        assert _trial_cpu(group) == cpu_description()
        # this process described otherwise (the Learner's, another process, is not)
        monkeypatch.setattr(_machine, "cpu_description", lambda: "the trial's CPU")
        assert _trial_cpu(group) == f"the trial's CPU; learners: {cpu_description()}"
    finally:
        group.shutdown()
