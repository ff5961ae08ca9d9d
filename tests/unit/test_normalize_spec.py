"""`normalize_observations` in the spec: the trial's env-to-module connector, RLlib's
replay path for DQN (the flat path takes no connector), refused beside a connector of
the spec's own and for a training loop of the user's own."""

from __future__ import annotations

import pytest

from tuner.rllib import build_config, flat_defaults_apply
from tuner.rllib._observations import mean_std_connector
from tuner.spec import SpecError, parse_spec
from tuner.validation import validate_spec


def spec_of(**patch):
    return parse_spec({"name": "n", "algorithm": "PPO", "env": "CartPole-v1", **patch})


def test_off_by_default_and_the_filter_when_on():
    from ray.rllib.connectors.env_to_module.mean_std_filter import MeanStdFilter

    assert spec_of().normalize_observations is None
    assert spec_of().observations_normalized is False  # CartPole's base setting: none
    assert build_config(spec_of())._env_to_module_connector is None  # noqa: SLF001
    config = build_config(spec_of(normalize_observations=True))
    assert config._env_to_module_connector is mean_std_connector  # noqa: SLF001
    assert isinstance(mean_std_connector(), MeanStdFilter)


def test_dqn_with_normalization_takes_rllibs_replay_path():
    dqn = {"algorithm": "DQN"}
    assert flat_defaults_apply(spec_of(**dqn))
    assert not flat_defaults_apply(spec_of(**dqn, normalize_observations=True))


@pytest.mark.parametrize(
    "patch, loc",
    [
        (
            {"config": {"env_to_module_connector": "my.connectors:Own"}},
            "normalize_observations",
        ),
        ({"algorithm": "mypkg.train:loop", "metric": "loss"}, "normalize_observations"),
    ],
)
def test_refused_beside_a_connector_of_its_own_or_an_own_loop(patch, loc):
    spec = spec_of(normalize_observations=True, **patch)
    with pytest.raises(SpecError) as err:
        validate_spec(spec, build_env=False, allowed_modules=["my", "mypkg"])
    locs = [issue.loc for issue in err.value.issues]
    assert loc in locs, err.value.issues


# -- base settings per env (tuner/search_spaces/env_settings.yaml) ---------------------------


def test_every_base_setting_names_its_source_and_a_known_algorithm():
    from tuner import algorithms as registry
    from tuner.search_spaces import env_settings_table

    table = env_settings_table()
    assert {"CartPole", "Acrobot", "Pendulum", "LunarLander", "HalfCheetah"} <= set(table)
    for per_algo in table.values():
        for algorithm, base in per_algo.items():
            assert algorithm in registry.base_algorithms()
            assert base.source.split()[0] in ("ppo.yml", "a2c.yml"), base.source
            assert base.settings()


@pytest.mark.parametrize(
    "env, algorithm, normalized, most_envs",
    [
        ("Acrobot-v1", "PPO", True, 16),
        ("LunarLander-v3", "PPO", False, 16),
        ("HalfCheetah-v5", "PPO", True, 1),  # keyed without the version
        ("CartPole-v1", "PPO", False, 8),
        ("Acrobot-v1", "APPO", True, None),
        ("Acrobot-v1", "DQN", False, None),  # zoo's dqn.yml keeps nothing of these
        ("Acrobot-v1", "Double_DQN", False, None),
    ],
)
def test_an_envs_base_settings_apply_where_the_spec_sets_none(
    env, algorithm, normalized, most_envs
):
    from tuner.rllib import most_vector_envs

    spec = spec_of(env=env, algorithm=algorithm)
    assert spec.observations_normalized is normalized
    assert (build_config(spec)._env_to_module_connector is not None) is normalized  # noqa: SLF001
    if most_envs is not None:
        assert most_vector_envs(spec) == most_envs


def test_what_the_spec_sets_wins_over_the_base():
    from tuner.rllib._update_ratio import num_envs_of

    assert spec_of(env="Acrobot-v1", normalize_observations=False).observations_normalized is False
    own = spec_of(env="Acrobot-v1", config={"env_to_module_connector": "my.c:Own"})
    assert own.observations_normalized is False
    pendulum = {"env": "Pendulum-v1", "config": {"train_batch_size_per_learner": 4096}}
    assert num_envs_of(spec_of(**pendulum)) == 4  # zoo's n_envs, not PPO's 8
    fixed = spec_of(**pendulum, resources={"num_envs_per_env_runner": 2})
    assert num_envs_of(fixed) == 2


def test_the_plan_states_the_base_settings_in_force_and_their_source():
    from tuner.validation import plan_spec

    plan = plan_spec(spec_of(env="Acrobot-v1"), None)
    assert plan.base_settings == {
        "normalize_observations": True,
        "num_envs_per_env_runner": 16,
        "source": "rl_zoo3 hyperparams/ppo.yml Acrobot-v1",
    }
    assert plan_spec(
        spec_of(env="Acrobot-v1", normalize_observations=False), None
    ).base_settings == {
        "num_envs_per_env_runner": 16,
        "source": "rl_zoo3 hyperparams/ppo.yml Acrobot-v1",
    }
    assert plan_spec(spec_of(env="Acrobot-v1", algorithm="DQN"), None).base_settings == {}
