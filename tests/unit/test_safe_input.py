"""Strict parsing: hostile bodies are a SpecError naming the place, never a crash."""

import math

import pytest

from tuner.spec import NestingTooDeep, SpecError, check_data, load_json_strict, load_yaml_strict
from tuner.spec._safe_input import INT64_MAX, INT64_MIN


def refusal(load, text, **kw):
    with pytest.raises(SpecError) as exc:
        load(text, **kw)
    return exc.value


# ---------------------------------------------------------------- YAML


def test_plain_yaml_spec_loads():
    text = (
        "name: cartpole-ppo\nalgorithm: PPO\nenv: CartPole-v1\n"
        "config: {lr: 1.0e-3, fcnet_activation: relu}\n"
        "search:\n  space:\n    gamma: {choice: [0.98, 0.99]}\n"
    )
    data = load_yaml_strict(text)
    assert data["config"] == {"lr": 1e-3, "fcnet_activation": "relu"}
    assert data["search"]["space"]["gamma"] == {"choice": [0.98, 0.99]}


def test_yaml_binary_tag_is_refused_with_line_and_column():
    err = refusal(load_yaml_strict, "name: x\nenv_config:\n  blob: !!binary aGVsbG8=\n")
    (issue,) = err.issues
    assert issue.loc == "(body)"
    assert "!!binary" in issue.msg
    assert "line 3, column 9" in issue.msg


@pytest.mark.parametrize(
    ("text", "tag"),
    [
        ("a: !!python/object/apply:os.system [touch x]\n", "!!python/object/apply:os.system"),
        ("a: !!python/name:os.system\n", "!!python/name:os.system"),
        ("a: !!set {x, y}\n", "!!set"),
        ("a: !!str 12\n", "!!str"),
        ("a: !!timestamp 2024-01-01\n", "!!timestamp"),
        ("a: !foo bar\n", "!foo"),
        ("a: ! 12\n", "!"),
        ("!!map {a: 1}\n", "!!map"),
        ("a: !!seq [1]\n", "!!seq"),
        ("%TAG !e! tag:example.com,2000:\n---\na: !e!foo 1\n", "tag:example.com,2000:foo"),
    ],
)
def test_every_explicit_yaml_tag_is_refused(text, tag):
    (issue,) = refusal(load_yaml_strict, text).issues
    assert tag in issue.msg
    assert "line" in issue.msg


def test_yaml_anchors_and_aliases_are_refused():
    assert "&base" in str(refusal(load_yaml_strict, "a: &base {x: 1}\nb: 2\n"))
    bomb = "a: &a [x, x]\nb: &b [*a, *a]\nc: [*b, *b]\n"
    assert "anchors" in str(refusal(load_yaml_strict, bomb))


def test_yaml_duplicate_keys_are_refused():
    assert "duplicate key 'lr'" in str(refusal(load_yaml_strict, "lr: 1\nlr: 2\n"))


def test_yaml_dates_stay_strings_and_scalars_are_plain():
    data = load_yaml_strict("d: 2024-01-01\nt: 2001-12-14t21:59:43.10-05:00\nquoted: '!!binary'\n")
    assert data == {"d": "2024-01-01", "t": "2001-12-14t21:59:43.10-05:00", "quoted": "!!binary"}


def test_yaml_too_deep_is_refused():
    # the first: libyaml's own limit (1000, in PyYAML 6.0.4's wheels) can stop it first
    for text in (
        "[" * 100_000 + "]" * 100_000,
        "[" * 40 + "]" * 40,
        "a:\n" + "".join(f"{' ' * i}- \n" for i in range(50)),
    ):
        with pytest.raises(NestingTooDeep) as exc:
            load_yaml_strict(text)
        assert "nested deeper than 32 levels" in str(exc.value)
    assert load_yaml_strict("[[[1]]]", max_depth=3) == [[[1]]]
    with pytest.raises(NestingTooDeep):
        load_yaml_strict("[[[[1]]]]", max_depth=3)


@pytest.mark.parametrize(
    "text",
    ["a: [1, 2\n", "a: 1\n---\nb: 2\n", "? [a, b]\n: 1\n", "a: " + "9" * 5000 + "\n", "\tx"],
)
def test_broken_yaml_is_a_spec_error(text):
    err = refusal(load_yaml_strict, text)
    assert err.issues[0].loc == "(body)"
    assert "not valid YAML" in err.issues[0].msg


# ---------------------------------------------------------------- JSON


def test_plain_json_loads():
    assert load_json_strict('{"a": [1, 2.5, "x", true, null], "b": {"c": "[[{"}}') == {
        "a": [1, 2.5, "x", True, None],
        "b": {"c": "[[{"},
    }


def test_json_100000_deep_is_refused():
    for text in ("[" * 100_000 + "]" * 100_000, "[" * 100_000, '{"a":' * 100_000):
        with pytest.raises(NestingTooDeep) as exc:
            load_json_strict(text)
        assert exc.value.issues[0].msg == "nested deeper than 32 levels"


def test_json_depth_ignores_brackets_in_strings():
    text = '{"a": "' + "[" * 100 + '\\"[", "b": ["]]]]"]}'
    assert load_json_strict(text)["b"] == ["]]]]"]
    assert load_json_strict("[" * 32 + "]" * 32) is not None
    with pytest.raises(NestingTooDeep):
        load_json_strict("[" * 33 + "]" * 33)


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_json_non_finite_literals_are_refused_at_their_path(literal):
    err = refusal(load_json_strict, f'{{"config": {{"lr": 1, "eps": [0, {literal}]}}}}')
    (issue,) = err.issues
    assert issue.loc == "config.eps.1"
    assert issue.value == literal


def test_json_duplicate_keys_and_syntax_errors_are_refused():
    assert "duplicate key 'a'" in str(refusal(load_json_strict, '{"a": 1, "a": 2}'))
    err = refusal(load_json_strict, '{"a": 1')
    assert "line 1, column 8" in err.issues[0].msg
    err = refusal(load_json_strict, '{"a": ' + "9" * 5000 + "}")
    assert "4300 digits" in err.issues[0].msg
    assert "set_int_max_str_digits" not in str(err)


# ---------------------------------------------------------------- values


def test_check_data_accepts_plain_data():
    data = {"a": [1, 2.5, "x", True, None, {"b": INT64_MAX, "c": INT64_MIN}], "d": -0.0}
    assert check_data(data, loc="config") == []


def test_check_data_names_each_bad_value():
    data = {
        "config": {
            "lr": math.nan,
            "cap": 2**64,
            "low": INT64_MIN - 1,
            "eps": [0, math.inf],
            "huge": 10**5000,
            1: "int key",
            "s": {1, 2},
            "raw": b"bytes",
        }
    }
    found = {(i.loc, i.msg.split(" (")[0]) for i in check_data(data)}
    assert found == {
        ("config.lr", "not a finite number"),
        ("config.cap", "integer outside the 64-bit range"),
        ("config.low", "integer outside the 64-bit range"),
        ("config.eps.1", "not a finite number"),
        ("config.huge", "integer outside the 64-bit range"),
        ("config.1", "keys must be strings, got int"),
        ("config.s", "set is not plain data"),
        ("config.raw", "bytes is not plain data"),
    }


def test_check_data_loc_prefix_and_root():
    assert [i.loc for i in check_data({"x": math.nan}, loc="config")] == ["config.x"]
    assert [i.loc for i in check_data(math.inf)] == ["(body)"]


def test_check_data_is_bounded():
    deep: list = []
    for _ in range(100_000):
        deep = [deep]
    assert check_data(deep) == []  # no recursion
    many = check_data([math.nan] * 10_000)
    assert len(many) == 101
    assert many[-1].msg == "more problems not shown"
    loop: list = []
    loop.append(loop)
    assert check_data(loop) == []  # a cycle (from Python callers) ends


def test_yaml_values_outside_json_are_found_by_check_data():
    data = load_yaml_strict("lr: .nan\nbig: 99999999999999999999\n")
    assert {i.loc for i in check_data(data)} == {"lr", "big"}
