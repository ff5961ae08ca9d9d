"""`wrappers: atari`: the spec field, the wrapped ALE env, and the trial config it makes."""

from __future__ import annotations

import numpy as np
import pytest

from tuner.rllib import build_config, check_env, fixed_settings, make_env
from tuner.rllib._envs import ATARI_OBS_SHAPE, _wrapped_creator, env_name, split_env_name
from tuner.rllib._settings import ATARI_CONV_FILTERS
from tuner.rllib._trial_config import MODEL_CONFIG_KEY
from tuner.spec import SpecError, parse_spec
from tuner.validation import validate_spec

BREAKOUT = {"name": "breakout", "algorithm": "PPO", "env": "ALE/Breakout-v5", "wrappers": "atari"}


def issues(data):
    with pytest.raises(SpecError) as err:
        parse_spec(data)
    return {i.loc: i for i in err.value.issues}


def test_wrappers_atari_on_an_ale_id_is_a_spec():
    spec = parse_spec(BREAKOUT)
    assert spec.wrappers == "atari"
    assert "wrappers: atari" in spec.to_yaml()
    assert parse_spec({**BREAKOUT, "wrappers": None}).wrappers is None


def test_wrappers_atari_on_a_non_ale_env_names_wrappers():
    found = issues({**BREAKOUT, "env": "CartPole-v1"})
    assert list(found) == ["wrappers"]
    assert "ALE/Breakout-v5" in found["wrappers"].msg
    assert "CartPole-v1" in found["wrappers"].msg
    assert "wrappers" in issues({**BREAKOUT, "env": "tests.envs:LineEnv"})


def test_wrappers_are_names_not_import_paths():
    found = issues({**BREAKOUT, "wrappers": "gymnasium.wrappers:TimeLimit"})
    assert found["wrappers"].value == "gymnasium.wrappers:TimeLimit"


def test_the_wrapped_env_gives_84x84x4_frames_in_minus_one_to_one():
    env = make_env("ALE/Breakout-v5", {}, "atari")
    try:
        assert env.observation_space.shape == ATARI_OBS_SHAPE
        obs, _ = env.reset(seed=0)
        assert obs.shape == ATARI_OBS_SHAPE
        assert obs.dtype == np.float32
        assert -1.0 <= obs.min()
        assert obs.max() <= 1.0
        obs, reward, *_ = env.step(env.action_space.sample())
        assert obs.shape == ATARI_OBS_SHAPE
        assert np.isfinite(reward)
        assert env.action_space.n == 4  # Breakout's minimal action set
        # RLlib's wrapper skips frames itself: the ALE env under it steps one at a time
        # and has no sticky actions
        assert env.unwrapped.spec.kwargs["frameskip"] == 1
        assert env.unwrapped.ale.getFloat("repeat_action_probability") == 0.0
    finally:
        env.close()


def test_env_config_overrides_the_atari_defaults():
    env = make_env("ALE/Breakout-v5", {"repeat_action_probability": 0.25}, "atari")
    try:
        assert env.unwrapped.ale.getFloat("repeat_action_probability") == pytest.approx(0.25)
        assert env.unwrapped.spec.kwargs["frameskip"] == 1
    finally:
        env.close()


def test_an_ale_id_builds_unwrapped_too():
    env = make_env("ALE/Breakout-v5", {})
    try:
        assert env.observation_space.shape == (210, 160, 3)
        assert env.unwrapped.spec.kwargs["frameskip"] == 4  # v5's own default, untouched
    finally:
        env.close()


def test_the_env_check_builds_the_wrapped_env():
    check_env("ALE/Breakout-v5", {}, "atari")  # no error
    with pytest.raises(SpecError) as err:
        check_env("ALE/Breakout-v5", {"obs_type": "ram"}, "atari")
    (issue,) = err.value.issues
    assert issue.loc == "wrappers"
    assert "(128,)" in issue.msg


def test_validate_spec_checks_the_wrapped_env():
    assert validate_spec(parse_spec(BREAKOUT)) == []
    spec = parse_spec({**BREAKOUT, "env_config": {"obs_type": "grayscale"}})
    with pytest.raises(SpecError) as err:
        validate_spec(spec)
    assert [i.loc for i in err.value.issues] == ["wrappers"]


def test_the_trial_config_has_the_atari_cnn_env_config_and_a_wrapped_name():
    spec = parse_spec(BREAKOUT)
    config = build_config(spec)
    assert config.env == "ALE/Breakout-v5+atari"
    assert config.env_config == {
        "frameskip": 1,
        "full_action_space": False,
        "repeat_action_probability": 0.0,
    }
    assert config.model_config["conv_filters"] == ATARI_CONV_FILTERS
    # what Tune reports as the trial's config (and the MLflow rllib_config artifact)
    assert config.to_dict()[MODEL_CONFIG_KEY]["conv_filters"] == ATARI_CONV_FILTERS
    # and what the MLflow child run's fixed.* params and the best trial's full config show
    assert fixed_settings(spec)["model_config"]["conv_filters"] == ATARI_CONV_FILTERS


@pytest.mark.parametrize(
    "patch",
    [
        {"model": {"conv_filters": [[16, [4, 4], 2], [32, [4, 4], 2]]}},
        {"config": {"model_config": {"conv_filters": [[16, [4, 4], 2], [32, [4, 4], 2]]}}},
    ],
)
def test_the_specs_own_conv_filters_win(patch):
    spec = parse_spec({**BREAKOUT, **patch})
    assert build_config(spec).model_config["conv_filters"] == [[16, [4, 4], 2], [32, [4, 4], 2]]
    assert fixed_settings(spec).get("model_config", {}).get("conv_filters") != ATARI_CONV_FILTERS


def test_no_wrappers_no_atari_defaults():
    spec = parse_spec({**BREAKOUT, "wrappers": None})
    config = build_config(spec)
    assert config.env == "ALE/Breakout-v5"
    assert config.env_config == {}
    assert "conv_filters" not in fixed_settings(spec).get("model_config", {})


def test_wrapped_names_round_trip():
    assert split_env_name(env_name("ALE/Breakout-v5", "atari")) == ("ALE/Breakout-v5", "atari")
    assert split_env_name(env_name("CartPole-v1", None)) == ("CartPole-v1", None)
    assert split_env_name("tests.envs:LineEnv") == ("tests.envs:LineEnv", None)


def test_the_worker_side_creator_takes_rllibs_env_context():
    from ray.rllib.env.env_context import EnvContext

    ctx = EnvContext({"frameskip": 1, "repeat_action_probability": 0.0}, worker_index=1)
    env = _wrapped_creator("ALE/Breakout-v5", "atari", ctx)
    try:
        assert env.observation_space.shape == ATARI_OBS_SHAPE
    finally:
        env.close()
