"""pbt and pb2: what the spec accepts, what the schedulers perturb, and the learning rate
a restored Learner trains with (real RLlib Learners, no cluster)."""

from __future__ import annotations

import gymnasium as gym
import pytest
from ray.tune.schedulers.pbt import _explore

from tuner.rllib._trainables import optimizer_lrs, reapply_config_lrs
from tuner.spec import SpecError, parse_spec
from tuner.sweep import param_space
from tuner.sweep._schedulers import build_scheduler
from tuner.validation import validate_spec

BASE = {"name": "t", "algorithm": "PPO", "env": "CartPole-v1"}
CONTINUOUS = {
    "lr": {"loguniform": [1e-4, 1e-2]},
    "clip_param": {"uniform": [0.1, 0.3]},
    "num_epochs": {"randint": [1, 4]},
    "train_batch_size_per_learner": {"quniform": [128, 512, 64]},
}


def spec(**patch):
    return parse_spec({**BASE, **patch})


def engine_issues(s):
    with pytest.raises(SpecError) as exc:
        validate_spec(s, build_env=False)
    return exc.value.issues


@pytest.mark.parametrize("scheduler", ["pbt", "pb2"])
def test_population_schedulers_refuse_optuna(scheduler):
    with pytest.raises(SpecError) as exc:
        spec(
            search={"method": "optuna", "space": {"lr": {"loguniform": [1e-4, 1e-2]}}},
            scheduler={"type": scheduler},
        )
    (issue,) = exc.value.issues
    assert issue.loc == "scheduler"
    assert issue.value["type"] == scheduler
    assert f"{scheduler!r} cannot be combined with search.method 'optuna'" in issue.msg


def test_pb2_names_each_key_it_cannot_bound():
    s = spec(
        search={
            "space": {
                "lr": {"loguniform": [1e-4, 1e-2]},
                "gamma": {"choice": [0.95, 0.99]},
                "lambda": {"choice": [0.9, 1.0]},
            }
        },
        scheduler={"type": "pb2"},
    )
    found = {i.loc: i for i in engine_issues(s)}
    assert set(found) == {"search.space.gamma", "search.space.lambda"}
    assert found["search.space.gamma"].value == "choice[0.95, 0.99]"
    assert "pb2 needs [low, high] bounds" in found["search.space.gamma"].msg
    assert "uniform, loguniform, randint, quniform" in found["search.space.gamma"].msg


def test_pb2_with_a_grid_key():
    s = spec(
        search={
            "method": "grid",
            "space": {"num_epochs": {"grid": [1, 2]}, "lr": CONTINUOUS["lr"]},
        },
        scheduler={"type": "pb2"},
    )
    (issue,) = engine_issues(s)
    assert issue.loc == "search.space.num_epochs"
    assert issue.value == "grid[1, 2]"


def test_pb2_on_the_default_space_says_so():
    issues = engine_issues(spec(scheduler={"type": "pb2"}))  # PPO's default has choices
    assert {i.loc for i in issues} >= {"search.space.gamma", "search.space.num_epochs"}
    assert all("PPO's default space; give search.space" in i.msg for i in issues)


def test_pb2_accepts_continuous_keys_and_samples_model_keys_once():
    s = spec(
        search={"space": {**CONTINUOUS, "model.fcnet_hiddens": {"choice": [[8], [16]]}}},
        scheduler={"type": "pb2"},
        config={"minibatch_size": 64},
    )
    validate_spec(s, build_env=False)
    space = dict(s.search.space)
    scheduler = build_scheduler(s.scheduler, space, param_space(s, space))
    assert type(scheduler).__name__ == "TunerPB2"
    # bounds keyed where RLlib keeps each value in the trial config, model keys left out
    assert scheduler._hyperparam_bounds == {
        "lr": [1e-4, 1e-2],
        "clip_param": [0.1, 0.3],
        "num_epochs": [1, 4],
        "_train_batch_size_per_learner": [128, 512],
    }


def test_pbt_mutates_each_key_where_the_config_keeps_it():
    space = {**CONTINUOUS, "gamma": {"choice": [0.95, 0.99]}}
    s = spec(search={"space": space}, scheduler={"type": "pbt"})
    space = dict(s.search.space)
    params = param_space(s, space)
    scheduler = build_scheduler(s.scheduler, space, params)
    assert set(scheduler._hyperparam_mutations) == {
        "lr",
        "clip_param",
        "num_epochs",
        "_train_batch_size_per_learner",
        "gamma",
    }
    assert set(scheduler._hyperparam_mutations) <= set(params)
    # a choice moves to a neighbouring value, never off the list (0.99 * 1.2)
    assert scheduler._hyperparam_mutations["gamma"] == [0.95, 0.99]
    sampled = {"lr": 1e-3, "clip_param": 0.2, "num_epochs": 2, "gamma": 0.99}
    sampled["_train_batch_size_per_learner"] = 256
    for _ in range(20):
        new, _ = _explore(sampled, scheduler._hyperparam_mutations, 0.25, (1.2, 0.8), None)
        assert new["gamma"] in (0.95, 0.99)


@pytest.mark.parametrize("scheduler", ["pbt", "pb2"])
def test_a_space_of_model_keys_only_gives_them_nothing_to_perturb(scheduler):
    s = spec(
        search={"space": {"model.fcnet_hiddens": {"choice": [[8], [16]]}}},
        scheduler={"type": scheduler},
    )
    (issue,) = engine_issues(s)
    assert issue.loc == "search.space"
    assert issue.value == ["model.fcnet_hiddens"]


def _learner(config):
    return config.rl_module(model_config={"fcnet_hiddens": [8]}).build_learner(
        env=gym.make(config.env)
    )


def test_a_restored_optimizer_state_brings_the_old_lr_and_the_config_lr_is_put_back():
    from ray.rllib.algorithms.ppo import PPOConfig

    saved = _learner(PPOConfig().environment("CartPole-v1").training(lr=1e-3))
    schedule = [[0, 1e-3], [1000, 1e-4]]
    perturbed = _learner(PPOConfig().environment("CartPole-v1").training(lr=schedule))
    key = "default_policy/default_optimizer"
    assert optimizer_lrs(perturbed) == {key: pytest.approx(1e-3)}
    fixed = _learner(PPOConfig().environment("CartPole-v1").training(lr=5e-4))
    # what a PBT exploit does: the clone's checkpoint into a trial with another lr
    fixed.set_state(saved.get_state())
    assert optimizer_lrs(fixed) == {key: pytest.approx(1e-3)}  # Ray #62173's analogue
    assert reapply_config_lrs(fixed, timestep=0) == {key: pytest.approx(5e-4)}
    assert optimizer_lrs(fixed) == {key: pytest.approx(5e-4)}
    # a schedule: its value at the restored trial's env steps
    perturbed.set_state(saved.get_state())
    assert reapply_config_lrs(perturbed, timestep=500) == {key: pytest.approx(5.5e-4)}


def test_every_optimizer_of_a_learner_gets_its_own_lr_back():
    from ray.rllib.algorithms.sac import SACConfig

    def sac(actor_lr, critic_lr):
        return _learner(
            SACConfig().environment("Pendulum-v1").training(actor_lr=actor_lr, critic_lr=critic_lr)
        )

    saved, restored = sac(1e-3, 2e-3), sac(3e-4, 4e-4)
    restored.set_state(saved.get_state())
    reapply_config_lrs(restored, timestep=0)
    lrs = optimizer_lrs(restored)
    assert lrs["default_policy/policy"] == pytest.approx(3e-4)
    assert lrs["default_policy/qf"] == pytest.approx(4e-4)


@pytest.mark.parametrize("scheduler", ["pbt", "pb2"])
def test_a_population_of_one_is_warned_about(scheduler):
    def warnings(num_samples):
        return validate_spec(
            spec(
                search={"num_samples": num_samples, "space": {"lr": CONTINUOUS["lr"]}},
                scheduler={"type": scheduler},
            ),
            build_env=False,
        )

    assert any("perturbs nothing" in w for w in warnings(1))
    assert not any("perturbs nothing" in w for w in warnings(4))
