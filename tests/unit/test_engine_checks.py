"""Checks that need RLlib but no cluster: keys, presets, envs, resources, stoppers."""

import pytest

from tuner.rllib import (
    build_config,
    check_fits,
    fixed_settings,
    trial_index,
    trial_resources,
    trial_seed,
)
from tuner.spec import SpecError, parse_spec, resolve_space
from tuner.sweep._stoppers import SweepStopper
from tuner.validation import validate_spec

BASE = {"name": "t", "algorithm": "PPO", "env": "CartPole-v1"}


def spec(**patch):
    return parse_spec({**BASE, **patch})


def engine_issues(s):
    with pytest.raises(SpecError) as exc:
        validate_spec(s)
    return exc.value.issues


def test_unknown_rllib_key_in_config():
    (issue,) = engine_issues(spec(config={"learning_rate": 0.1}))
    assert issue.loc == "config.learning_rate"
    assert issue.value == 0.1
    assert "unknown RLlib PPO setting" in issue.msg


def test_unknown_rllib_key_in_space():
    (issue,) = engine_issues(spec(search={"space": {"epochs": {"choice": [1, 2]}}}))
    assert issue.loc == "search.space.epochs"


def test_spec_owned_keys_point_to_the_spec_field():
    (issue,) = engine_issues(spec(config={"num_env_runners": 4}))
    assert issue.loc == "config.num_env_runners"
    assert "resources.num_env_runners" in issue.msg


def test_rllib_rejects_inconsistent_config():
    (issue,) = engine_issues(
        spec(config={"train_batch_size_per_learner": 100, "minibatch_size": 500})
    )
    assert issue.loc == "config"
    assert "RLlib rejects" in issue.msg


def test_unregistered_gym_id():
    (issue,) = engine_issues(spec(env="NoSuchEnv-v9"))
    assert issue.loc == "env"
    assert issue.value == "NoSuchEnv-v9"


def test_unimportable_env_path():
    (issue,) = engine_issues(spec(env="no_such_pkg.envs:Foo"))
    assert issue.loc == "env"
    assert "cannot import" in issue.msg


def test_env_config_rejected_by_constructor():
    (issue,) = engine_issues(spec(env_config={"no_such_kwarg": 1}))
    assert issue.loc == "env_config"
    assert issue.value == {"no_such_kwarg": 1}


def test_env_constructor_exception():
    (issue,) = engine_issues(spec(env="tests.envs:LineEnv", env_config={"length": -1}))
    assert issue.loc == "env"
    assert "constructor failed" in issue.msg
    assert "length" in issue.msg


def test_noisy_warns_and_presets_merge_under_user_config():
    s = spec(algorithm="Rainbow_DQN", config={"n_step": 1, "lr": 1e-3})
    warnings = validate_spec(s)
    assert any("noisy" in w and "no effect" in w for w in warnings)
    fixed = fixed_settings(s)
    assert fixed["n_step"] == 1
    assert fixed["num_atoms"] == 51
    assert fixed["lr"] == 1e-3
    assert fixed["replay_buffer_config"]["type"] == "PrioritizedEpisodeReplayBuffer"
    cfg = build_config(s)
    assert cfg.n_step == 1
    assert cfg.double_q
    assert cfg.dueling
    assert cfg.v_max == 10.0
    assert cfg.replay_buffer_config["capacity"] == 60000
    assert validate_spec(spec(algorithm="DQN", config={"noisy": True}))


def test_appo_preset_grad_clip_and_user_override():
    assert build_config(spec(algorithm="APPO")).grad_clip == 30.0
    assert build_config(spec(algorithm="APPO", config={"grad_clip": 5.0})).grad_clip == 5.0


def test_dqn_and_sac_own_settings_reach_rllib_and_the_spec_wins():
    """DQN's 3-step returns and uniform replay, SAC's uniform replay (presets.yaml), in the
    config RLlib builds; a spec's own value wins, a spec's own buffer keys merge over
    ours, and the named presets keep RLlib's prioritized replay and 1-step returns."""
    dqn = build_config(spec(algorithm="DQN"))
    assert dqn.n_step == 3
    assert dqn.replay_buffer_config["type"] == "EpisodeReplayBuffer"
    assert dqn.replay_buffer_config["capacity"] == 50000
    sac = build_config(spec(algorithm="SAC", env="Pendulum-v1"))
    assert sac.replay_buffer_config["type"] == "EpisodeReplayBuffer"
    assert sac.replay_buffer_config["capacity"] == 1_000_000
    own = build_config(
        spec(algorithm="DQN", config={"n_step": 1, "replay_buffer_config": {"capacity": 900}})
    )
    assert own.n_step == 1
    assert own.replay_buffer_config["type"] == "EpisodeReplayBuffer"
    assert own.replay_buffer_config["capacity"] == 900
    per = build_config(spec(algorithm="DQN_PER"))
    assert per.n_step == 1
    assert per.replay_buffer_config["type"] == "PrioritizedEpisodeReplayBuffer"


def test_model_and_resources_reach_the_config():
    s = spec(
        model={"fcnet_hiddens": [8]}, resources={"num_env_runners": 2, "num_gpus_per_learner": 0.25}
    )
    cfg = build_config(s)
    assert cfg.model_config["fcnet_hiddens"] == [8]
    assert cfg.num_env_runners == 2
    assert cfg.num_gpus_per_learner == 0.25


def test_default_space_used_when_omitted():
    assert "lr" in resolve_space(spec())
    assert list(resolve_space(spec(search={"space": {"gamma": {"choice": [0.9]}}}))) == ["gamma"]


def test_trial_seed_and_index():
    assert trial_index("a1b2c_00003") == 3
    assert [trial_seed(7, i) for i in range(3)] == [7, 8, 9]


def test_resources_that_never_fit_are_rejected_with_numbers():
    s = spec(resources={"num_env_runners": 4})
    total, bundles = trial_resources(s)
    assert total["CPU"] == 5
    assert len(bundles) == 5
    with pytest.raises(SpecError) as exc:
        check_fits(s, [{"CPU": 2.0}])
    issue = exc.value.issues[0]
    assert issue.loc == "resources.num_env_runners"
    assert "CPU: 5" in issue.msg
    assert "CPU: 2" in issue.msg
    check_fits(s, [{"CPU": 3.0}, {"CPU": 2.0}])  # fits across two nodes
    gpu = spec(resources={"num_gpus_per_learner": 0.25})
    with pytest.raises(SpecError, match="GPU: 0.25"):
        check_fits(gpu, [{"CPU": 8.0}])
    check_fits(gpu, [{"CPU": 8.0, "GPU": 1.0}])
    strict = spec(resources={"num_env_runners": 2, "placement_strategy": "STRICT_PACK"})
    with pytest.raises(SpecError, match="STRICT_PACK"):
        check_fits(strict, [{"CPU": 2.0}, {"CPU": 2.0}])


def test_stopper_reads_nested_results_and_stops_all_on_target():
    stopper = SweepStopper(
        {"env_runners/episode_return_mean": 100.0, "training_iteration": 5},
        target_key="env_runners/episode_return_mean",
    )
    assert not stopper(
        "t0", {"env_runners": {"episode_return_mean": 50.0}, "training_iteration": 1}
    )
    assert not stopper("t0", {"env_runners": {"episode_return_mean": float("nan")}})
    assert not stopper.stop_all()
    assert stopper("t0", {"env_runners": {}, "training_iteration": 5})
    assert not stopper.stop_all()
    assert stopper("t1", {"env_runners": {"episode_return_mean": 120.0}})
    assert stopper.stop_all()
    assert stopper.target_reached_by == "t1"


@pytest.mark.parametrize("env", ["os:system", "subprocess:run", "builtins:eval", "tests.envs:np"])
def test_import_path_must_name_an_env_not_arbitrary_code(env):
    (issue,) = engine_issues(spec(env=env))
    assert issue.loc == "env"
    assert issue.value == env


@pytest.mark.parametrize(
    "config, warned",
    [
        ({"torch_compile_learner": True}, True),
        (
            {
                "torch_compile_learner": True,
                "torch_compile_learner_what_to_compile": "forward_train",
            },
            True,
        ),
        (
            {
                "torch_compile_learner": True,
                "torch_compile_learner_what_to_compile": "complete_update",
            },
            False,
        ),
        ({}, False),
    ],
)
def test_torch_compile_learner_that_compiles_nothing_is_warned(config, warned):
    warnings = validate_spec(spec(config=config))
    assert any("compiles nothing" in w for w in warnings) == warned
