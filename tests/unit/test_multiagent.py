"""Multi-agent specs: the multi_agent section, the RLlib config built from it, the env
checks, the allowed-modules rule, and per-agent metrics in MLflow and the ranking."""

from __future__ import annotations

import pickle

import pytest

from tuner.results import lookup
from tuner.rllib import Evaluation, apply_values, build_config, check_env, load_object
from tuner.rllib._envs import env_object_problem
from tuner.rllib._multi_agent import multi_agent_of, policy_mapping_fn
from tuner.spec import SpecError, json_schema, parse_spec
from tuner.sweep._summary import trial_view_from_result
from tuner.tracking import result_metrics
from tuner.validation import validate_spec

ENV = "tuner_examples.multiagent:MultiCartPole"
ALLOWED = ["tuner_examples"]
TINY = {"train_batch_size_per_learner": 128, "minibatch_size": 64, "num_epochs": 1}


def ma_spec(**patch):
    data = {
        "name": "ma",
        "algorithm": "PPO",
        "env": ENV,
        "config": dict(TINY),
        "model": {"fcnet_hiddens": [16]},
        "multi_agent": {"policies": ["left", "right"], "policy_mapping": {"cart_1": "right"}},
        "metric": "env_runners/agent_episode_returns_mean/cart_0",
    }
    data.update(patch)
    return parse_spec(data)


def issues(fn, *args, **kwargs):
    with pytest.raises(SpecError) as exc:
        fn(*args, **kwargs)
    return [(i.loc, i.value) for i in exc.value.issues], str(exc.value)


# -- the spec ------------------------------------------------------------------------


def test_an_empty_section_is_one_shared_policy():
    spec = ma_spec(multi_agent={}, metric="env_runners/episode_return_mean")
    assert spec.multi_agent.policies == ["shared"]
    assert spec.multi_agent.policy_of("cart_0") == spec.multi_agent.policy_of(7) == "shared"
    assert parse_spec({"name": "s", "algorithm": "PPO", "env": "CartPole-v1"}).multi_agent is None


def test_agents_map_by_id_then_star_then_first_policy():
    ma = ma_spec(
        multi_agent={"policies": ["a", "b", "c"], "policy_mapping": {"x": "b", "1": "c"}}
    ).multi_agent
    assert [ma.policy_of(x) for x in ("x", 1, "1", "y")] == ["b", "c", "c", "a"]
    ma = ma_spec(multi_agent={"policies": ["a", "b"], "policy_mapping": {"*": "b"}}).multi_agent
    assert ma.policy_of("anyone") == "b"


@pytest.mark.parametrize(
    "section, loc, value",
    [
        (
            {"policies": ["left", "right"], "policy_mapping": {"cart_1": "middle"}},
            "multi_agent.policy_mapping.cart_1",
            "middle",
        ),
        ({"policies": ["a"], "policy_mapping": {"*": "b"}}, "multi_agent.policy_mapping.*", "b"),
        (
            {"policies": ["a"], "policy_mapping": {"x/y": "a"}},
            "multi_agent.policy_mapping.x/y",
            "x/y",
        ),
        ({"policies": ["a", "a"]}, "multi_agent.policies.1", "a"),
        ({"policies": ["a", "default_policy"]}, "multi_agent.policies.1", "default_policy"),
        ({"policies": ["__all_modules__"]}, "multi_agent.policies.0", "__all_modules__"),
        ({"policies": ["a/b"]}, "multi_agent.policies.0", "a/b"),
        ({"policies": []}, "multi_agent.policies", []),
        ({"policies": ["a"], "mapping": {}}, "multi_agent.mapping", {}),
    ],
)
def test_bad_sections_name_the_field_and_value(section, loc, value):
    found, _ = issues(ma_spec, multi_agent=section, metric="env_runners/episode_return_mean")
    assert (loc, value) in found, found


@pytest.mark.parametrize(
    "metric, multi_agent",
    [
        ("env_runners/agent_episode_returns_mean/cart_0", None),
        ("env_runners/module_episode_returns_mean/left", None),
        ("env_runners/module_episode_returns_mean/middle", {"policies": ["left", "right"]}),
        ("learners/default_policy/total_loss", {"policies": ["left", "right"]}),
    ],
)
def test_a_per_agent_or_per_policy_metric_must_fit_the_section(metric, multi_agent):
    found, text = issues(ma_spec, metric=metric, multi_agent=multi_agent)
    assert found == [("metric", metric)], found
    assert "multi_agent" in text
    assert "needs" in text or "not one of" in text


def test_per_agent_and_per_policy_metrics_are_accepted():
    for metric in (
        "env_runners/agent_episode_returns_mean/cart_0",
        "env_runners/module_episode_returns_mean/right",
        "learners/left/total_loss",
        "learners/__all_modules__/num_env_steps_trained",
        "env_runners/episode_return_mean",
    ):
        assert ma_spec(metric=metric).metric == metric


def test_the_schema_publishes_the_section():
    schema = json_schema()
    assert "multi_agent" in schema["properties"]
    section = schema["$defs"]["MultiAgentSpec"]
    assert section["properties"]["policies"]["items"]["pattern"]
    assert set(section["properties"]) == {"policies", "policy_mapping"}


# -- the RLlib config ----------------------------------------------------------------


def test_config_has_one_module_per_policy_with_the_spec_model():
    from ray.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec
    from tuner_examples.multiagent import MultiCartPole

    config = build_config(ma_spec())
    assert config.is_multi_agent
    assert list(config.policies) == ["left", "right"]
    assert isinstance(config.rl_module_spec, MultiRLModuleSpec)
    assert [config.policy_mapping_fn(a, None) for a in ("cart_0", "cart_1")] == ["left", "right"]
    modules = config.get_multi_rl_module_spec(env=MultiCartPole()).rl_module_specs
    assert set(modules) == {"left", "right"}
    assert all(m.model_config["fcnet_hiddens"] == [16] for m in modules.values())


def test_a_searched_model_key_reaches_every_module():
    from ray.rllib.algorithms.ppo import PPOConfig
    from tuner_examples.multiagent import MultiCartPole

    # what a Tune trial gets: the config dict with the sampled values laid over it,
    # through pickling (Tune ships it to the trial's actor)
    params = apply_values(build_config(ma_spec()).to_dict(), {"model.fcnet_hiddens": [8, 8]})
    config = PPOConfig.from_dict(pickle.loads(pickle.dumps(params)))
    assert config.policy_mapping_fn("cart_1", None) == "right"
    modules = config.get_multi_rl_module_spec(env=MultiCartPole()).rl_module_specs
    assert {k: m.model_config["fcnet_hiddens"] for k, m in modules.items()} == {
        "left": [8, 8],
        "right": [8, 8],
    }


def test_the_mapping_function_is_data_and_pickles_by_reference():
    ma = ma_spec(multi_agent={"policies": ["a", "b"], "policy_mapping": {"0": "b", "*": "a"}})
    fn = pickle.loads(pickle.dumps(policy_mapping_fn(ma.multi_agent)))
    assert [fn(0, None), fn("0", None, worker=1), fn(5, None)] == ["b", "b", "a"]
    assert b"tuner.rllib" in pickle.dumps(fn)  # no code in the pickle itself


def test_the_section_is_read_back_from_a_built_config():
    spec = ma_spec()
    back = multi_agent_of(build_config(spec))
    assert back.policies == ["left", "right"]
    assert back.policy_mapping == {"cart_1": "right", "*": "left"}
    single = parse_spec({"name": "s", "algorithm": "PPO", "env": "CartPole-v1"})
    assert multi_agent_of(build_config(single)) is None


@pytest.mark.parametrize(
    "algorithm, buffer",
    [
        # DQN's and SAC's own uniform replay (presets.yaml), Rainbow's prioritized
        ("DQN", "MultiAgentEpisodeReplayBuffer"),
        ("Rainbow_DQN", "MultiAgentPrioritizedEpisodeReplayBuffer"),
        ("SAC", "MultiAgentEpisodeReplayBuffer"),
    ],
)
def test_replay_algorithms_get_rllibs_multi_agent_buffer(algorithm, buffer):
    config = build_config(ma_spec(algorithm=algorithm, config={}))
    assert config.replay_buffer_config["type"] == buffer
    config.validate()
    single = build_config(parse_spec({"name": "s", "algorithm": algorithm, "env": "CartPole-v1"}))
    assert not single.replay_buffer_config["type"].startswith("MultiAgent")


def test_episode_replay_buffer_maps_too():
    config = build_config(
        ma_spec(algorithm="DQN", config={"replay_buffer_config": {"type": "EpisodeReplayBuffer"}})
    )
    assert config.replay_buffer_config["type"] == "MultiAgentEpisodeReplayBuffer"


# -- validation against the env ------------------------------------------------------


def test_the_example_validates_under_its_allowed_module():
    assert validate_spec(ma_spec(), allowed_modules=ALLOWED) == []


def test_a_multi_agent_env_outside_the_allowed_modules_is_refused_before_import():
    import sys

    spec = ma_spec(env="tuner_probe_never_imported.envs:Arena")
    found, text = issues(validate_spec, spec, allowed_modules=ALLOWED)
    assert found == [("env", "tuner_probe_never_imported.envs:Arena")]
    assert "tuner_examples" in text
    assert "cannot import" not in text
    assert "tuner_probe_never_imported" not in sys.modules
    found, _ = issues(validate_spec, ma_spec(), allowed_modules=["other_pkg"])
    assert found == [("env", ENV)]
    found, _ = issues(validate_spec, ma_spec(), allowed_modules=[])
    assert found == [("env", ENV)]


def test_a_multi_agent_env_needs_the_section():
    found, text = issues(
        validate_spec,
        ma_spec(multi_agent=None, metric="env_runners/episode_return_mean"),
        allowed_modules=ALLOWED,
    )
    assert [loc for loc, _ in found] == ["multi_agent"]
    assert "MultiAgentEnv" in text


def test_a_single_agent_env_takes_no_section():
    spec = ma_spec(env="CartPole-v1", metric="env_runners/episode_return_mean")
    found, text = issues(validate_spec, spec)
    assert [loc for loc, _ in found] == ["multi_agent"]
    assert "single-agent" in text


def test_agent_ids_are_checked_against_the_env():
    spec = ma_spec(multi_agent={"policies": ["a", "b"], "policy_mapping": {"cart_9": "b"}})
    found, text = issues(validate_spec, spec, allowed_modules=ALLOWED)
    assert found == [("multi_agent.policy_mapping.cart_9", "cart_9")]
    assert "cart_0, cart_1" in text
    metric = "env_runners/agent_episode_returns_mean/cart_5"
    found, _ = issues(validate_spec, ma_spec(metric=metric), allowed_modules=ALLOWED)
    assert found == [("metric", metric)]


def test_a_policy_no_agent_uses_is_a_warning():
    spec = ma_spec(
        env_config={"num_agents": 1, "pole_lengths": [0.5]},
        multi_agent={"policies": ["left", "right"]},
    )
    (warning,) = validate_spec(spec, allowed_modules=ALLOWED)
    assert "'right'" in warning
    assert "does not train" in warning


@pytest.mark.parametrize(
    "key, value, owner",
    [
        ("policies", ["x"], "multi_agent.policies"),
        (
            "policy_mapping_fn",
            "tuner_examples.multiagent:MultiCartPole",
            "multi_agent.policy_mapping",
        ),
    ],
)
def test_rllibs_own_multi_agent_settings_belong_to_the_section(key, value, owner):
    spec = ma_spec(config={**TINY, key: value})
    found, text = issues(validate_spec, spec, allowed_modules=ALLOWED)
    assert found == [(f"config.{key}", value)]
    assert owner in text


def test_env_config_errors_of_a_multi_agent_env_are_named():
    found, _ = issues(
        check_env, ENV, {"num_agents": 2, "pole_lengths": [1.0]}, multi_agent=ma_spec().multi_agent
    )
    assert found == [("env", ENV)]


def test_multi_agent_env_classes_and_factories_are_envs():
    from ray.rllib.env.multi_agent_env import MultiAgentEnv

    assert issubclass(load_object(ENV), MultiAgentEnv)
    assert env_object_problem(ENV, load_object(ENV)) is None
    assert (
        env_object_problem(
            "tests.envs:make_multi_cartpole", load_object("tests.envs:make_multi_cartpole")
        )
        is None
    )
    problem = env_object_problem("pkg:Thing", type("Thing", (), {"__module__": "pkg"}))
    assert "MultiAgentEnv" in problem
    spec = ma_spec(env="tests.envs:make_multi_cartpole")
    assert validate_spec(spec, allowed_modules=["tests"]) == []


# -- metrics: MLflow curation, lookup, ranking, evaluation -----------------------------


def rllib_result(agent_ids=("cart_0", "cart_1")):
    return {
        "training_iteration": 3,
        "num_env_steps_sampled_lifetime": 384,
        "env_runners": {
            "episode_return_mean": 50.0,
            "agent_episode_returns_mean": {a: 20.0 + 10 * i for i, a in enumerate(agent_ids)},
            "module_episode_returns_mean": {"left": 20.0, "right": 30.0},
        },
        "learners": {
            "left": {"total_loss": 1.5, "policy_loss": 0.5},
            "right": {"total_loss": 2.5, "policy_loss": float("nan")},
            "__all_modules__": {"total_loss": 9.0},
        },
    }


def test_mlflow_gets_every_agents_and_policys_return():
    metrics = result_metrics(rllib_result())
    assert metrics["env_runners/agent_episode_returns_mean/cart_0"] == 20.0
    assert metrics["env_runners/agent_episode_returns_mean/cart_1"] == 30.0
    assert metrics["env_runners/module_episode_returns_mean/left"] == 20.0
    assert metrics["env_runners/module_episode_returns_mean/right"] == 30.0
    assert metrics["env_runners/episode_return_mean"] == 50.0
    assert metrics["learners/left/total_loss"] == 1.5
    assert metrics["learners/right/total_loss"] == 2.5
    assert "learners/right/policy_loss" not in metrics  # NaN is no metric
    assert not any("__all_modules__" in k for k in metrics)


def test_int_agent_ids_are_found_as_tune_flattens_them():
    result = rllib_result(agent_ids=(0, 1))
    key = "env_runners/agent_episode_returns_mean/1"
    assert lookup(result, key) == 30.0
    assert lookup(result, "env_runners/agent_episode_returns_mean/2") is None
    assert result_metrics(result, (key,))[key] == 30.0
    flat = {"env_runners/agent_episode_returns_mean/0": 4.0, "training_iteration": 1}
    assert result_metrics(flat)["env_runners/agent_episode_returns_mean/0"] == 4.0


def test_a_trial_view_reads_one_agents_return():
    view = trial_view_from_result(
        "t_00001",
        "TERMINATED",
        rllib_result(),
        sampled={},
        metric="env_runners/agent_episode_returns_mean/cart_1",
        base_seed=0,
    )
    assert view.metric == 30.0
    assert view.iterations == 3


def test_an_evaluation_scores_the_metrics_agent_or_policy():
    done = Evaluation(
        checkpoint="c",
        env=ENV,
        episodes=2,
        mean_return=15.0,
        std_return=1.0,
        returns=[14.0, 16.0],
        agent_returns={"cart_0": [4.0, 6.0], "cart_1": [10.0, 10.0]},
        module_returns={"left": [4.0, 6.0], "right": [10.0, 10.0]},
    )
    assert done.score("env_runners/agent_episode_returns_mean/cart_0") == 5.0
    assert done.score("evaluation/env_runners/module_episode_returns_mean/right") == 10.0
    assert done.score("env_runners/episode_return_mean") == 15.0
    assert done.score("env_runners/agent_episode_returns_mean/nobody") == 15.0


def test_the_progress_table_names_the_agent_of_the_metric():
    from tuner.sweep._progress import metric_column

    assert metric_column("env_runners/agent_episode_returns_mean/cart_0") == (
        "agent_episode_returns_mean/cart_0"
    )
    assert metric_column("env_runners/module_episode_returns_mean/left") == (
        "module_episode_returns_mean/left"
    )
    assert metric_column("env_runners/episode_return_mean") == "episode_return_mean"
    assert metric_column("learners/left/total_loss") == "total_loss"
