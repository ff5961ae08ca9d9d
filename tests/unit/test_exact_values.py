"""Every key a search space samples reaches RLlib under its own name, and what is
reported is what RLlib built its config from (issue: sampled values were reported null
and fixed values re-sampled)."""

from __future__ import annotations

import random

import pytest

from tuner import algorithms as registry
from tuner.rllib import TRAINABLES, as_trial_runs, sampled_values
from tuner.search_spaces import UPDATES_PER_ENV_STEP
from tuner.spec import SpecError, parse_spec, resolve_space
from tuner.sweep import param_space
from tuner.validation import validate_spec


def draw(params: dict, rng: random.Random) -> dict:
    """A trial's config: every Tune domain in the param space replaced by a sample."""
    out = {}
    for key, value in params.items():
        if isinstance(value, dict):
            out[key] = draw(value, rng)
        elif hasattr(value, "sample"):
            out[key] = value.sample(random_state=rng.randrange(2**31))
        else:
            out[key] = value
    return out


def used_by_rllib(config, key: str):
    if key.startswith("model."):
        return config.model_config[key.removeprefix("model.")]
    # RLlib keeps `lambda` as `lambda_` (a Python keyword)
    return getattr(config, key) if hasattr(config, key) else getattr(config, f"{key}_")


@pytest.mark.parametrize("algorithm", registry.names())
def test_every_default_space_value_arrives_and_is_reported(algorithm):
    env = "Pendulum-v1" if "discrete" not in registry.get(algorithm).actions else "CartPole-v1"
    spec = parse_spec({"name": "exact", "algorithm": algorithm, "env": env})
    space = resolve_space(spec)
    entry = registry.get(algorithm)
    assert set(space) == set(entry.default_space)
    assert not set(space) & set(entry.preset_config)  # a preset's own value always wins
    params = param_space(spec, space)
    for seed in range(3):
        trial_config = draw(params, random.Random(seed))
        reported = sampled_values(trial_config, list(space))
        # what the trial and then RLlib's Algorithm do with its config in the constructor
        runs = as_trial_runs(trial_config, spec.base_algorithm)
        built = TRAINABLES[spec.base_algorithm].get_default_config().update_from_dict(runs)
        for key, dom in space.items():
            value = reported[key]
            assert value is not None, (algorithm, key, value)
            assert dom.contains(value), (algorithm, key, value)
            assert used_by_rllib(built, key) == value, (algorithm, key)
            if key == UPDATES_PER_ENV_STEP:  # tuner's key: RLlib trains ratio x batch
                assert built.training_intensity == value * built.total_train_batch_size
        # and read back from the config RLlib reports in its results (to_dict())
        assert sampled_values(built.to_dict(), list(space)) == reported


def test_a_key_a_preset_fixes_leaves_the_default_space():
    base = set(registry.get("DQN").default_space)
    starts = "num_steps_sampled_before_learning_starts"
    assert {starts, "target_network_update_freq"} <= base
    spec = parse_spec({"name": "rainbow", "algorithm": "Rainbow_DQN", "env": "CartPole-v1"})
    space = resolve_space(spec)
    assert set(space) == base - set(registry.get("Rainbow_DQN").preset_config)
    assert not {starts, "target_network_update_freq"} & set(space)
    for seed in range(5):  # every trial runs Rainbow's own learning start and target period
        trial_config = draw(param_space(spec, space), random.Random(seed))
        assert trial_config[starts] == 10000
        assert trial_config["target_network_update_freq"] == 500


def test_a_key_fixed_under_config_leaves_the_default_space():
    spec = parse_spec(
        {
            "name": "fixed",
            "algorithm": "SAC",
            "env": "Pendulum-v1",
            "config": {"train_batch_size_per_learner": 256, "gamma": 0.97},
        }
    )
    space = resolve_space(spec)
    assert "train_batch_size_per_learner" not in space
    assert "gamma" not in space
    assert "actor_lr" in space
    trial_config = draw(param_space(spec, space), random.Random(0))
    built = TRAINABLES["SAC"].get_default_config().update_from_dict(trial_config)
    assert built.train_batch_size_per_learner == 256
    assert built.gamma == 0.97


def test_a_key_fixed_under_model_leaves_the_default_space(monkeypatch):
    import tuner.algorithms as spaces
    from tuner.search_spaces import Domain

    default = {
        "lr": Domain.model_validate({"loguniform": [1e-4, 1e-2]}),
        "model.fcnet_hiddens": Domain.model_validate({"choice": [[8], [16]]}),
        "model.fcnet_activation": Domain.model_validate({"choice": ["tanh", "relu"]}),
        "model.vf_share_layers": Domain.model_validate({"choice": [True, False]}),
    }
    monkeypatch.setattr(spaces, "default_space", lambda algorithm: dict(default))
    spec = parse_spec(
        {
            "name": "fixed",
            "algorithm": "PPO",
            "env": "CartPole-v1",
            "model": {"fcnet_hiddens": [32], "fcnet_activation": "relu"},
        }
    )
    space = resolve_space(spec)
    assert set(space) == {"lr", "model.vf_share_layers"}
    # the fixed values are the ones every trial builds its RLModule with
    trial_config = draw(param_space(spec, space), random.Random(0))
    built = TRAINABLES["PPO"].get_default_config().update_from_dict(trial_config)
    assert built.model_config["fcnet_hiddens"] == [32]
    assert built.model_config["fcnet_activation"] == "relu"
    assert built.model_config["vf_share_layers"] in (True, False)


def test_a_key_both_fixed_and_searched_is_refused_naming_both():
    # a default space leaves out what the spec fixes; a space the user writes that
    # searches a fixed key is a contradiction: one of the two would be ignored silently
    for fixed, space_key in (
        ({"model": {"fcnet_hiddens": [32]}}, "model.fcnet_hiddens"),
        ({"config": {"lr": 0.001}}, "lr"),
    ):
        dom = (
            {"choice": [[8], [16]]} if space_key.startswith("model.") else {"choice": [1e-4, 1e-3]}
        )
        spec = parse_spec(
            {
                "name": "fixed",
                "algorithm": "PPO",
                "env": "CartPole-v1",
                **fixed,
                "search": {"space": {space_key: dom}},
            }
        )
        with pytest.raises(SpecError) as err:
            validate_spec(spec, build_env=False)
        (issue,) = err.value.issues
        assert issue.loc == f"search.space.{space_key}"
        where = space_key if space_key == "lr" else "model.fcnet_hiddens"
        assert f"also fixed as {'config.' if where == 'lr' else ''}{where}" in issue.msg
    # searched and not fixed: searched as written
    spec = parse_spec(
        {
            "name": "searched",
            "algorithm": "PPO",
            "env": "CartPole-v1",
            "model": {"fcnet_activation": "relu"},
            "search": {"space": {"model.fcnet_hiddens": {"choice": [[8], [16]]}}},
        }
    )
    validate_spec(spec, build_env=False)
    trial_config = draw(param_space(spec, resolve_space(spec)), random.Random(0))
    built = TRAINABLES["PPO"].get_default_config().update_from_dict(trial_config)
    assert built.model_config["fcnet_hiddens"] in ([8], [16])


@pytest.mark.parametrize("algorithm", registry.base_algorithms())
@pytest.mark.parametrize("budget", [3_000, 30_000, 200_000])
def test_a_budgeted_default_space_reaches_rllib_exactly_and_respects_the_budget(algorithm, budget):
    """With stop.timesteps_total, the default space's budget rules narrow it: a trial
    gets at least about 10 updates and never a batch larger than its budget; what is
    sampled (DQN's epsilon schedule too) reaches RLlib as it is reported."""
    env = "Pendulum-v1" if "discrete" not in registry.get(algorithm).actions else "CartPole-v1"
    spec = parse_spec(
        {"name": "b", "algorithm": algorithm, "env": env, "stop": {"timesteps_total": budget}}
    )
    space = resolve_space(spec)
    rules = registry.get(algorithm).space_budget
    for key, rule in rules.items():
        if "schedule" in rule:
            assert all(s[-1][0] <= budget for s in space[key].args), key
            continue
        choices = space[key].args
        if "min_updates" in rule:
            fits = [c for c in choices if c * rule["min_updates"] <= budget]
            assert fits == choices or choices == [min(registry.default_space(algorithm)[key].args)]
            assert max(choices) <= budget or len(choices) == 1
        if "at_most_fraction" in rule:
            assert all(c <= rule["at_most_fraction"] * budget for c in choices) or len(choices) == 1
        if "at_most" in rule:
            assert max(choices) <= min(space[rule["at_most"]].args), key
    params = param_space(spec, space)
    trial_config = draw(params, random.Random(budget))
    reported = sampled_values(trial_config, list(space))
    built = TRAINABLES[spec.base_algorithm].get_default_config().update_from_dict(trial_config)
    for key, dom in space.items():
        assert dom.contains(reported[key]), (key, reported[key])
        used = used_by_rllib(built, key)
        used = [list(p) for p in used] if key == "epsilon" else used
        assert used == reported[key], (algorithm, key)


def test_the_budget_narrows_ppos_rollout_and_a_fixed_batch_bounds_the_minibatch():
    small = resolve_space(
        parse_spec(
            {
                "name": "s",
                "algorithm": "PPO",
                "env": "CartPole-v1",
                "stop": {"timesteps_total": 5_000},
            }
        )
    )
    assert small["train_batch_size_per_learner"].args == [256]  # 5,000 / 10 = 500
    assert max(small["minibatch_size"].args) <= 256
    fixed = resolve_space(
        parse_spec(
            {
                "name": "f",
                "algorithm": "PPO",
                "env": "CartPole-v1",
                "config": {"train_batch_size_per_learner": 64},
            }
        )
    )
    assert "train_batch_size_per_learner" not in fixed
    assert fixed["minibatch_size"].args == [32, 64]
    no_budget = resolve_space(parse_spec({"name": "n", "algorithm": "DQN", "env": "CartPole-v1"}))
    assert "epsilon" not in no_budget  # a schedule over the budget needs one


def test_every_default_space_key_says_why():
    for name in registry.base_algorithms():
        entry = registry.get(name)
        keys = set(entry.default_space) | set(entry.space_budget)
        assert keys <= set(entry.space_reasons), (name, keys - set(entry.space_reasons))
        assert all(entry.space_reasons[k].strip() for k in keys)
