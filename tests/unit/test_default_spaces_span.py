"""The default spaces span rl-zoo3's tuned configs: every value of its tuned agent for
each task of the anchors bench (bench/anchors.py) lies in our default space for that
algorithm. No task's answer is copied in; the space only has to reach it.

The tuned values are rl-zoo3's hyperparams/{ppo,dqn,sac}.yml entries, in RLlib's names
(n_steps x n_envs -> train_batch_size_per_learner, batch_size -> minibatch_size (PPO) or
train_batch_size_per_learner (DQN, SAC), gae_lambda -> lambda, n_epochs -> num_epochs,
learning_starts -> num_steps_sampled_before_learning_starts, target_update_interval ->
target_network_update_freq, net_arch -> model.fcnet_hiddens); SAC's unset keys are SB3's
defaults.
"""

from __future__ import annotations

import pytest

from tuner.algorithms import default_space
from tuner.search_spaces import UPDATES_PER_ENV_STEP, Domain
from tuner.spec import parse_spec, resolve_space

BATCH = "train_batch_size_per_learner"

DQN_ACROBOT_LUNAR = {
    "lr": 6.3e-4,
    "gamma": 0.99,
    "train_batch_size_per_learner": 128,
    "target_network_update_freq": 250,
    "num_steps_sampled_before_learning_starts": 0,
    "model.fcnet_hiddens": [256, 256],
}
TUNED = {
    ("PPO", "CartPole-v1"): {
        "lr": 1e-3,
        "gamma": 0.98,
        "lambda": 0.8,
        "clip_param": 0.2,
        "num_epochs": 20,
        "train_batch_size_per_learner": 32 * 8,
        "minibatch_size": 256,
    },
    # rl-zoo3 tunes Acrobot-v1 and LunarLander with the same values
    ("DQN", "Acrobot-v1"): DQN_ACROBOT_LUNAR,
    ("DQN", "LunarLander-v3"): DQN_ACROBOT_LUNAR,
    ("DQN", "MountainCar-v0"): {
        "lr": 4e-3,
        "gamma": 0.98,
        "train_batch_size_per_learner": 128,
        "target_network_update_freq": 600,
        "num_steps_sampled_before_learning_starts": 1000,
        "model.fcnet_hiddens": [256, 256],
    },
    ("SAC", "Pendulum-v1"): {
        "actor_lr": 1e-3,
        "critic_lr": 1e-3,
        "gamma": 0.99,
        "tau": 0.005,
        "train_batch_size_per_learner": 256,
        "num_steps_sampled_before_learning_starts": 100,
        "model.fcnet_hiddens": [256, 256],
        "target_entropy": "auto",
    },
}

# DQN's update ratio of each tuned entry, updates per env step (gradient_steps per
# train_freq env steps; -1: as many as env steps)
TUNED_DQN_RATIOS = {"Acrobot-v1": 1.0, "LunarLander-v3": 1.0, "MountainCar-v0": 8 / 16}


def spans(domain: Domain, value: object) -> bool:
    """Whether a domain reaches a value: a numeric choice or a range by its bounds (the
    searcher's neighbours cover what lies between choices), anything else by
    membership."""
    args = domain.args
    if domain.kind in ("choice", "grid"):
        numbers = [a for a in args if isinstance(a, int | float) and not isinstance(a, bool)]
        if isinstance(value, int | float) and len(numbers) == len(args):
            return min(numbers) <= value <= max(numbers)
        return value in args
    return domain.contains(value)


@pytest.mark.parametrize(("algorithm", "task"), sorted(TUNED))
def test_the_default_space_reaches_rl_zoo3s_tuned_config(algorithm, task):
    space = default_space(algorithm)
    tuned = TUNED[(algorithm, task)]
    assert set(tuned) <= set(space), f"{algorithm} searches none of {set(tuned) - set(space)}"
    outside = {k: v for k, v in tuned.items() if not spans(space[k], v)}
    assert outside == {}, f"{task}: tuned values outside {algorithm}'s default space"


@pytest.mark.parametrize("task", sorted(TUNED_DQN_RATIOS))
def test_the_dqn_space_pairs_each_tuned_batch_with_its_update_ratio(task):
    """Batch and update ratio are searched apart (updates_per_env_step), so each tuned
    entry's pair is one point of the space at its budget, not only each value alone."""
    space = resolve_space(
        parse_spec(
            {"name": "span", "algorithm": "DQN", "env": task, "stop": {"timesteps_total": 100_000}}
        )
    )
    assert TUNED[("DQN", task)]["train_batch_size_per_learner"] in space[BATCH].args
    assert TUNED_DQN_RATIOS[task] in space[UPDATES_PER_ENV_STEP].args


@pytest.mark.parametrize(
    ("budget", "choices"),
    [
        (10_000, [250]),
        (50_000, [250, 500]),
        (100_000, [250, 500, 1000]),
        (120_000, [250, 500, 1000]),
        (1_000_000, [250, 500, 1000, 5000]),
    ],
)
def test_the_dqn_target_interval_spans_zoos_tuned_ones_as_sb3_runs_them(budget, choices):
    """At least 250 env steps: rl-zoo3's tuned entries sync 250 (Acrobot, LunarLander) to
    1000 (atari) env steps apart, CartPole's 10 in effect 256 (SB3 syncs once between
    its bursts of 128 updates every 256 env steps). At most 1 % of the budget: zoo's
    are at most 0.5 % of theirs; at 100k a target synced every 5,000 (5 %) lost in every
    trial measured (defaults.yaml). A budget under 25k keeps the shortest."""
    space = resolve_space(
        parse_spec(
            {
                "name": "t",
                "algorithm": "DQN",
                "env": "Acrobot-v1",
                "stop": {"timesteps_total": budget},
            }
        )
    )
    assert space["target_network_update_freq"].args == choices


def test_spans_reads_a_numeric_choice_by_its_bounds_and_a_categorical_one_by_membership():
    numeric = Domain.model_validate({"choice": [10, 100, 1000]})
    assert spans(numeric, 600)
    assert not spans(numeric, 5000)
    nets = Domain.model_validate({"choice": [[64, 64], [256, 256]]})
    assert spans(nets, [256, 256])
    assert not spans(nets, [400, 300])
    assert not spans(Domain.model_validate({"loguniform": [1e-4, 4e-3]}), 5e-3)
