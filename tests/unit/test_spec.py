"""The spec schema: defaults, round trips and bad input named by field and value."""

import json

import pytest

from tuner.spec import ExperimentSpec, SpecError, json_schema, load_spec, parse_spec

BASE = {"name": "t", "algorithm": "PPO", "env": "CartPole-v1"}


def issues(data):
    with pytest.raises(SpecError) as exc:
        parse_spec(data)
    return exc.value.issues


def test_defaults_fill_in():
    spec = parse_spec(BASE)
    assert spec.search.method == "random"
    assert spec.metric == "env_runners/episode_return_mean"
    assert spec.resources.num_env_runners == 0
    assert spec.base_algorithm == "PPO"


def test_preset_runs_on_dqn():
    assert parse_spec({**BASE, "algorithm": "Rainbow_DQN"}).base_algorithm == "DQN"


def test_yaml_round_trip(tmp_path):
    spec = parse_spec({**BASE, "search": {"space": {"lr": {"loguniform": [1e-4, 1e-2]}}}})
    path = tmp_path / "s.yaml"
    path.write_text(spec.to_yaml())
    assert load_spec(path) == spec


def test_json_file(tmp_path):
    path = tmp_path / "s.json"
    path.write_text(json.dumps(BASE))
    assert load_spec(path).name == "t"


def test_every_field_is_described():
    schema = json_schema()
    for model in [schema, *schema["$defs"].values()]:
        for field, prop in model.get("properties", {}).items():
            assert prop.get("description"), f"{model.get('title')}.{field} has no description"


@pytest.mark.parametrize(
    "patch, loc, bad",
    [
        ({"algorithm": "A3C"}, "algorithm", "A3C"),
        ({"name": "../etc"}, "name", "../etc"),
        ({"name": "a b"}, "name", "a b"),
        ({"env": "CartPole v1; rm"}, "env", "CartPole v1; rm"),
        ({"env": "pkg.mod:"}, "env", "pkg.mod:"),
        ({"search": {"num_samples": 0}}, "search.num_samples", 0),
        ({"search": {"method": "bayes"}}, "search.method", "bayes"),
        ({"search": {"space": {"lr": {"uniform": [0.1, 0.01]}}}}, "search.space.lr", None),
        ({"search": {"space": {"lr": {"loguniform": [0, 1]}}}}, "search.space.lr", None),
        ({"search": {"space": {"gamma": {"choice": []}}}}, "search.space.gamma.choice", []),
        ({"search": {"space": {"gamma": 0.99}}}, "search.space.gamma", 0.99),
        ({"search": {"space": {"g": {"choice": [1], "grid": [2]}}}}, "search.space.g", None),
        ({"search": {"space": {"n": {"randint": [5, 1]}}}}, "search.space.n", None),
        ({"scheduler": {"type": "bohb"}}, "scheduler.type", "bohb"),
        ({"scheduler": {"type": "hyperband", "brackets": 0}}, "scheduler.brackets", 0),
        ({"scheduler": {"type": "asha", "grace_period": 9, "max_t": 3}}, "scheduler", None),
        ({"stop": {"stop_on_target": True}}, "stop", None),
        ({"stop": {"timesteps_total": -5}}, "stop.timesteps_total", -5),
        ({"stop": {"iterations": 5}}, "stop.iterations", 5),
        ({"resources": {"num_gpus_per_learner": 1.5}}, "resources.num_gpus_per_learner", 1.5),
        ({"resources": {"placement_strategy": "ANY"}}, "resources.placement_strategy", "ANY"),
        ({"mode": "maximize"}, "mode", "maximize"),
        ({"seed": -1}, "seed", -1),
        ({"metric": "evaluation/env_runners/episode_return_mean"}, "(spec)", None),
        ({"checkpoint": {"num_to_keep": 0}}, "checkpoint.num_to_keep", 0),
    ],
)
def test_bad_specs_name_the_field_and_value(patch, loc, bad):
    found = issues({**BASE, **patch})
    assert any(i.loc == loc or i.loc.startswith(loc + ".") for i in found), found
    if bad is not None:
        assert any(i.value == bad for i in found), found
    assert all(str(i) for i in found)


def test_grid_needs_grid_method():
    found = issues({**BASE, "search": {"method": "random", "space": {"lr": {"grid": [1, 2]}}}})
    assert "grid" in str(found[0])
    assert "search.method" in str(found[0])


def test_not_a_mapping():
    assert issues(["PPO"])[0].loc == "(spec)"


def test_missing_required_fields():
    assert {i.loc for i in issues({"name": "x"})} == {"algorithm"}
    (missing,) = issues({"name": "x", "algorithm": "PPO"})
    assert missing.loc == "env"
    assert "PPO" in missing.msg  # an RLlib algorithm needs one
    # your own training loop may go without an env, but must say what its metric is
    (metric,) = issues({"name": "x", "algorithm": "mypkg.train:loop"})
    assert "metric" in metric.msg
    assert parse_spec({"name": "x", "algorithm": "mypkg.train:loop", "metric": "loss"}).env is None


def test_unreadable_file(tmp_path):
    with pytest.raises(SpecError) as exc:
        load_spec(tmp_path / "nope.yaml")
    assert exc.value.issues[0].loc == "(file)"
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed")
    with pytest.raises(SpecError, match="not valid YAML"):
        load_spec(bad)


def test_trial_criteria_are_flattened_result_keys():
    spec = ExperimentSpec.model_validate(
        {**BASE, "stop": {"episode_return_mean": 450, "timesteps_total": 1000}}
    )
    assert spec.stop.trial_criteria() == {
        "env_runners/episode_return_mean": 450,
        "num_env_steps_sampled_lifetime": 1000,
    }


def test_evaluation_at_end_needs_a_budget_naming_the_field():
    from tuner.spec import SpecError, parse_spec

    base = {"name": "e", "algorithm": "PPO", "env": "CartPole-v1"}
    with pytest.raises(SpecError) as err:
        parse_spec(base | {"evaluation": {"at_end": True}})
    assert any(i.loc == "evaluation.at_end" for i in err.value.issues), err.value.issues
    ok = parse_spec(
        base
        | {
            "evaluation": {"at_end": True},
            "stop": {"timesteps_total": 1000},
            "metric": "evaluation/env_runners/episode_return_mean",
        }
    )
    assert ok.evaluation.enabled
    assert not ok.evaluation.interval
    with pytest.raises(SpecError, match="needs evaluation.interval or at_end"):
        parse_spec(base | {"metric": "evaluation/env_runners/episode_return_mean"})


def test_a_trials_budget_is_spent_at_its_stop_criteria():
    from tuner.rllib._trial_config import budget_spent

    assert budget_spent({"env_steps": 300}, {"num_env_steps_sampled_lifetime": 384}, 3)
    assert not budget_spent({"env_steps": 300}, {"num_env_steps_sampled_lifetime": 256}, 2)
    nested = {"env_runners": {"num_env_steps_sampled_lifetime": 300}}
    assert budget_spent({"env_steps": 300}, nested, 1)
    assert budget_spent({"iterations": 2}, {}, 2)
    assert not budget_spent({"iterations": 2}, {}, 1)
    assert not budget_spent({}, {"num_env_steps_sampled_lifetime": 10**9}, 99)


def test_every_typo_is_reported_at_once_with_the_name_it_meant():
    """Two typos, one in the spec's own fields and one among RLlib's: both reported, each
    with the closest real name."""
    from tuner.validation import Checks, check_source

    text = (
        "name: typo\nalgorithm: PPO\nenv: CartPole-v1\nmax_concurent_trials: 2\n"
        "stop: {training_iteratoin: 3}\nconfig: {num_epoch: 3}\n"
    )
    checked = check_source(text, True, Checks(build_env=False))
    got = {i.loc: i.msg for i in checked.issues}
    assert got == {
        "max_concurent_trials": "unknown field; did you mean `max_concurrent_trials`?",
        "stop.training_iteratoin": "unknown field; did you mean `training_iteration`?",
        "config.num_epoch": "unknown RLlib PPO setting; did you mean `num_epochs`?",
    }
