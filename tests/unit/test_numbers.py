"""Numbers as people write them: `1e6` is a number in a spec (as YAML 1.2 and JSON read
it), an integral float fills an int field, and a string where RLlib's default is a
number is refused before anything launches, naming the setting."""

from __future__ import annotations

import json

import pytest
import yaml

from tuner.spec import load_yaml_strict, parse_spec
from tuner.validation import Checks, check_source

SPEC = "name: numbers\nalgorithm: PPO\nenv: CartPole-v1\n"


@pytest.mark.parametrize(
    "text",
    ["1e6", "1.0e6", "1.0e+6", "1E6", "1.e6", "+1e6", "-1e-3", ".5e3", "1e-4", "3e-4"],
)
def test_exponent_numbers_are_floats_as_yaml_1_2_and_json_read_them(text):
    value = load_yaml_strict(f"a: {text}\n")["a"]
    assert isinstance(value, float)
    assert value == float(text)
    if not text.startswith(("+", ".")) and ".e" not in text:  # JSON has no +1, .5 or 1.e
        assert value == json.loads(text)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1e", "1e"),
        ("e6", "e6"),
        ("1e6x", "1e6x"),
        ("v1e6", "v1e6"),
        ("1.2.3e4", "1.2.3e4"),
        ('"1e6"', "1e6"),
        ("'1.0e6'", "1.0e6"),
        ("0x1e5", 0x1E5),
        ("12", 12),
        ("1.5", 1.5),
        ("2024-01-01", "2024-01-01"),
    ],
)
def test_other_scalars_keep_their_meaning(text, value):
    got = load_yaml_strict(f"a: {text}\n")["a"]
    assert got == value
    assert type(got) is type(value)


def test_an_exponent_past_a_float_is_still_refused_as_not_finite():
    from tuner.spec import check_data

    (issue,) = check_data(load_yaml_strict("config: {lr: 1e999}\n"))
    assert issue.loc == "config.lr"
    assert "finite" in issue.msg


def test_pyyamls_own_loaders_are_left_as_they_were():
    """The resolver belongs to the strict loader only: yaml.safe_load elsewhere (data
    files, MLflow's stored spec) reads as before."""
    assert yaml.safe_load("a: 1e6\n") == {"a": "1e6"}


def test_an_integral_float_fills_an_int_field():
    spec = parse_spec(load_yaml_strict(SPEC + "stop: {timesteps_total: 1e5}\nseed: 1e1\n"))
    assert spec.stop.timesteps_total == 100000
    assert type(spec.stop.timesteps_total) is int
    assert spec.seed == 10
    assert type(spec.seed) is int


def test_stop_and_config_written_with_exponents_validate():
    checked = check_source(
        SPEC + "config: {vf_clip_param: 1e6, lr: 3e-4}\nstop: {timesteps_total: 1e5}\n",
        True,
        Checks(build_env=False),
    )
    assert checked.ok, checked.issues
    assert checked.spec is not None
    assert checked.spec.config == {"vf_clip_param": 1e6, "lr": 3e-4}
    assert type(checked.spec.config["vf_clip_param"]) is float
    assert checked.spec.stop.timesteps_total == 100000


def test_a_string_where_rllibs_default_is_a_number_is_refused_naming_the_setting():
    """`vf_clip_param: "1e6"` once passed validation and then failed every trial in
    RLlib's loss (`clamp() received (Tensor, int, str)`)."""
    checked = check_source(
        SPEC + "config: {vf_clip_param: '1e6', num_epochs: four, lr: 1.0e-3}\n"
        "search:\n  space:\n    minibatch_size: {choice: [64, '128']}\n",
        True,
        Checks(build_env=False),
    )
    got = {i.loc: i for i in checked.issues}
    assert set(got) == {"config.vf_clip_param", "config.num_epochs", "search.space.minibatch_size"}
    clip = got["config.vf_clip_param"]
    assert clip.value == "1e6"
    assert "a number (a float: its default is 10.0)" in clip.msg
    assert "without quotes" in clip.msg
    epochs = got["config.num_epochs"]
    assert epochs.value == "four"
    assert "an int" in epochs.msg
    assert "quotes" not in epochs.msg
    assert got["search.space.minibatch_size"].value == "128"


def test_the_string_is_refused_where_the_schema_fails_too():
    checked = check_source(
        SPEC + "config: {vf_clip_param: '1e6'}\nmax_concurent_trials: 2\n",
        True,
        Checks(build_env=False),
    )
    assert {i.loc for i in checked.issues} == {"max_concurent_trials", "config.vf_clip_param"}


def test_integral_floats_become_ints_where_rllibs_default_is_an_int():
    checked = check_source(
        SPEC + "config: {train_batch_size_per_learner: 1e3, num_epochs: 4.0, gamma: 1e0}\n"
        "search:\n  space:\n    minibatch_size: {choice: [6.4e1, 1.28e2]}\n",
        True,
        Checks(build_env=False),
    )
    assert checked.ok, checked.issues
    assert checked.spec is not None
    config = checked.spec.config
    assert config == {"train_batch_size_per_learner": 1000, "num_epochs": 4, "gamma": 1.0}
    assert type(config["train_batch_size_per_learner"]) is int
    assert type(config["num_epochs"]) is int
    assert type(config["gamma"]) is float  # RLlib's default gamma is a float
    values = checked.space["minibatch_size"].args
    assert values == [64, 128]
    assert all(type(v) is int for v in values)
    dumped = checked.spec.model_dump(mode="json")  # what the API stores and the driver gets
    assert dumped["config"]["train_batch_size_per_learner"] == 1000


def test_words_rllib_takes_for_a_number_and_lists_pass():
    from tuner.spec import number_setting_issues

    defaults = {"rollout_fragment_length": 50, "lr": 5e-4, "num_epochs": 1, "sgd": -1}
    assert (
        number_setting_issues(
            {"rollout_fragment_length": "auto", "lr": [[0, 1e-3], [1e6, 1e-5]], "sgd": "x"},
            None,
            defaults,
            "IMPALA",
        )
        == []
    )
    (issue,) = number_setting_issues({"rollout_fragment_length": "50"}, None, defaults, "IMPALA")
    assert issue.loc == "config.rollout_fragment_length"
