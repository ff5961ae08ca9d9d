"""A spec is data: config values RLlib would turn into code are refused unless they name
RLlib's own classes (tuner/spec/rllib_classes.yaml) or an import path under allowed
modules."""

import sys
from pathlib import Path

import pytest
import yaml

from tuner.search_spaces import Domain
from tuner.spec import (
    SpecError,
    check_code_refs,
    check_space_code_refs,
    module_allowed,
    resolve_code_refs,
)

ROOT = Path(__file__).resolve().parents[2]
ATTACK = "{type: subprocess.Popen, _args: [[touch, probe-file]]}"


def issues(config, allowed=()):
    return check_code_refs(config, loc="config", allowed_modules=list(allowed))


def space_issues(space, allowed=()):
    return check_space_code_refs(space, allowed_modules=list(allowed))


def locs(found):
    return [i.loc for i in found]


# ---------------------------------------------------------------- the issue's attacks


def test_replay_buffer_type_that_runs_a_process_is_refused():
    found = issues({"replay_buffer_config": {"type": ATTACK, "capacity": 1000}})
    assert locs(found) == ["config.replay_buffer_config.type"]
    assert found[0].value == ATTACK
    msg = found[0].msg
    assert "PrioritizedEpisodeReplayBuffer" in msg
    assert "TUNER_ALLOWED_MODULES" in msg
    assert "--allow-module" in msg
    assert "package.module:Name" in msg


def test_callbacks_os_abort_is_refused():
    found = issues({"callbacks": "os.abort"})
    assert locs(found) == ["config.callbacks"]
    assert "TUNER_ALLOWED_MODULES" in found[0].msg


@pytest.mark.parametrize(
    "value",
    [
        "subprocess.Popen",
        "os.system",
        "buffer.yaml",  # from_config reads a .yaml/.json type as a file
        "PrioritizedEpisodeReplayBuffer.json",
        '{"type": "subprocess.Popen"}',
        "Popen",  # a short name outside the allowlist: looked up in RLlib's modules
        "mypkg.buffers:MyBuffer",  # an import path, but no module is allowed
        ["EpisodeReplayBuffer"],
        {"type": "subprocess.Popen"},
    ],
)
def test_replay_buffer_type_other_than_rllibs_is_refused(value):
    assert locs(issues({"replay_buffer_config": {"type": value}}))


@pytest.mark.parametrize(
    "name", ["PrioritizedEpisodeReplayBuffer", "EpisodeReplayBuffer", "ReplayBuffer"]
)
def test_rllib_replay_buffers_by_short_name_pass(name):
    assert issues({"replay_buffer_config": {"type": name, "capacity": 50000}}) == []


def test_type_names_come_from_the_family_of_the_parent_key():
    assert issues({"exploration_config": {"type": "EpsilonGreedy"}}) == []
    assert locs(issues({"exploration_config": {"type": "PrioritizedEpisodeReplayBuffer"}}))
    assert locs(issues({"replay_buffer_config": {"type": "EpsilonGreedy"}}))
    nested = {
        "exploration_config": {
            "type": "EpsilonGreedy",
            "epsilon_schedule": {"type": "PiecewiseSchedule", "endpoints": [[0, 1.0]]},
        }
    }
    assert issues(nested) == []


def test_import_path_passes_only_under_an_allowed_module():
    config = {"callbacks": "mypkg.cb:MyCallbacks"}
    assert issues(config, ["mypkg"]) == []
    assert issues(config, ["mypkg.cb"]) == []
    for allowed in ([], ["mypkgx"], ["mypkg.other"], ["my"], [""]):
        assert locs(issues(config, allowed)) == ["config.callbacks"], allowed


@pytest.mark.parametrize("tail", ["\n", "\r\n", " ", "\t"])
def test_a_trailing_newline_or_space_does_not_slip_through(tail):
    """Every pattern matches the whole value (`$` alone also matches before a final
    newline, so "mypkg:X\\n" once passed as an allowed import path)."""
    assert locs(issues({"callbacks": f"mypkg.cb:MyCallbacks{tail}"}, ["mypkg"])) == [
        "config.callbacks"
    ]
    assert locs(issues({"replay_buffer_config": {"type": f"mypkg:X{tail}"}}, ["mypkg"])) == [
        "config.replay_buffer_config.type"
    ]
    assert locs(issues({"env": f"CartPole-v1{tail}"})) == ["config.env"]
    assert not module_allowed(f"mypkg{tail}:X", ["mypkg"])
    assert not module_allowed("mypkg:X", [f"mypkg{tail}x"])


@pytest.mark.parametrize(
    "key", ["extra_python_environs_for_worker", "extra_python_environs_for_driver"]
)
def test_environment_variables_for_rllib_processes_are_refused(key):
    """Env vars in a trial's processes run code without naming it (LD_PRELOAD, ...)."""
    env = {"LD_PRELOAD": "/tmp/evil.so"}
    (found,) = issues({key: env}, ["mypkg"])
    assert found.loc == f"config.{key}"
    assert "environment variables" in found.msg
    nested = issues({"evaluation_config": {key: env}})
    assert locs(nested) == [f"config.evaluation_config.{key}"]
    assert locs(space_issues({key: {"choice": [{}, env]}})) == [f"search.space.{key}"]
    assert issues({key: {}}) == []
    assert issues({key: None}) == []  # RLlib's default sets none


def test_an_offline_output_path_is_refused():
    """`output` makes every env runner write its episodes to a path or bucket the spec
    picks (RLlib's offline writer), with credentials from the spec."""
    (found,) = issues({"output": "s3://somebody-elses-bucket/x"}, ["mypkg"])
    assert found.loc == "config.output"
    assert "write its episodes" in found.msg
    assert locs(space_issues({"output": {"choice": [None, "/tmp/x"]}})) == ["search.space.output"]
    assert issues({"output": None}) == []  # RLlib's default: no offline output


def test_dotted_path_under_an_allowed_module_is_refused_with_a_hint():
    (found,) = issues({"callbacks": "mypkg.cb.MyCallbacks"}, ["mypkg"])
    assert "'mypkg.cb:MyCallbacks'" in found.msg


@pytest.mark.parametrize(
    ("config", "loc"),
    [
        ({"callbacks_class": "os.abort"}, "config.callbacks_class"),
        ({"callbacks": [None, "os.abort"]}, "config.callbacks.1"),
        ({"callbacks_on_episode_end": "os.abort"}, "config.callbacks_on_episode_end"),
        ({"sample_collector": "os.abort"}, "config.sample_collector"),
        ({"env_to_module_connector": "os.abort"}, "config.env_to_module_connector"),
        ({"learner_connector": "pkg.mod:build"}, "config.learner_connector"),
        ({"policy_mapping_fn": {"type": "os.abort"}}, "config.policy_mapping_fn.type"),
        ({"custom_evaluation_function": "os.abort"}, "config.custom_evaluation_function"),
        ({"env_runner_cls": "os.abort"}, "config.env_runner_cls"),
        ({"_learner_class": "os.abort"}, "config._learner_class"),
        ({"rl_module_spec": {"module_class": "os.abort"}}, "config.rl_module_spec.module_class"),
        ({"stats_cls_lookup": {"mean": "os.abort"}}, "config.stats_cls_lookup.mean"),
        ({"model": {"custom_model": "os.abort"}}, "config.model.custom_model"),
        ({"exploration_config": {"type": ATTACK}}, "config.exploration_config.type"),
        ({"evaluation_config": {"callbacks": "os.abort"}}, "config.evaluation_config.callbacks"),
        ({"evaluation_config": {"env": "subprocess.Popen"}}, "config.evaluation_config.env"),
        (
            {"algorithm_config_overrides_per_module": {"p0": {"callbacks_class": "os.abort"}}},
            "config.algorithm_config_overrides_per_module.p0.callbacks_class",
        ),
        (
            {"off_policy_estimation_methods": {"x": {"type": "os.abort"}}},
            "config.off_policy_estimation_methods.x.type",
        ),
        ({"input": "mypkg.reader.MyReader"}, "config.input"),
        ({"td_error_loss_fn": "os.abort"}, "config.td_error_loss_fn"),
        ({"env": "this:CartPole-v1"}, "config.env"),
    ],
)
def test_code_keys_are_refused_wherever_they_are(config, loc):
    assert locs(issues(config)) == [loc]


def test_ordinary_config_passes():
    config = {
        "lr": 3e-4,
        "gamma": 0.99,
        "lambda": 0.95,
        "train_batch_size_per_learner": 2000,
        "fcnet_activation": "relu",
        "model_config": {
            "fcnet_hiddens": [64, 64],
            "fcnet_activation": "tanh",
            "fcnet_kernel_initializer": "xavier_uniform_",
            "vf_share_layers": True,
        },
        "epsilon": [[0, 1.0], [10000, 0.05]],
        "evaluation_config": {"explore": False},
        "framework": "torch",
        "observation_filter": "MeanStdFilter",
        "td_error_loss_fn": "mse",
        "input": "sampler",
        "callbacks": None,
        "env_config": {"type": "anything", "render_mode": "rgb_array"},
        "learner_config_dict": {"type": "user data", "my_fn": "x.y"},
        "batch_mode": "complete_episodes",
        "custom_resources_per_env_runner": {"accelerator_type:A100": 0.1},
    }
    assert issues(config) == []


def test_plain_envs_pass_and_dotted_or_unallowed_envs_do_not():
    assert issues({"env": "CartPole-v1"}) == []
    assert issues({"env": "ALE/Pong-v5"}) == []
    assert issues({"env": "mypkg.envs:MyEnv"}, ["mypkg"]) == []
    for env in ("subprocess.Popen", "mypkg.envs:MyEnv", "{type: os.abort}", 3):
        assert locs(issues({"env": env})) == ["config.env"], env


def test_presets_pass():
    presets = yaml.safe_load((ROOT / "tuner/algorithms/presets.yaml").read_text())
    for name, preset in presets.items():
        assert issues(preset["config"]) == [], name


def test_example_specs_and_default_spaces_pass():
    for path in sorted((ROOT / "experiments").glob("*.yaml")):
        spec = yaml.safe_load(path.read_text())
        # the example code (experiments/tuner_examples) runs where its module is allowed
        allowed = ["tuner_examples"]
        assert issues(spec.get("config", {}), allowed) == [], path.name
        assert issues(spec.get("model", {}), allowed) == [], path.name
        space = (spec.get("search") or {}).get("space") or {}
        assert space_issues(space, allowed) == [], path.name
    defaults = yaml.safe_load((ROOT / "tuner/search_spaces/defaults.yaml").read_text())
    for algo, entry in defaults.items():
        assert space_issues(entry["space"]) == [], algo


def test_rllib_default_configs_pass():
    """RLlib's own defaults (to_dict) hold no value the rules refuse."""
    from ray.rllib.algorithms.dqn import DQNConfig
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.algorithms.sac import SACConfig

    for config_cls in (PPOConfig, DQNConfig, SACConfig):
        assert issues(config_cls().to_dict()) == [], config_cls.__name__


def test_very_deep_config_is_an_issue_not_a_recursion_error():
    deep: dict = {"type": "os.abort"}
    for _ in range(5000):
        deep = {"a": deep}
    found = issues(deep)
    assert found
    assert "nested deeper" in found[0].msg


# ---------------------------------------------------------------- search spaces


def test_space_code_key_is_checked_for_each_value():
    space = {"callbacks": {"choice": ["mypkg.cb:MyCallbacks", "os.abort"]}}
    found = space_issues(space, ["mypkg"])
    assert [(i.loc, i.value) for i in found] == [("search.space.callbacks", "os.abort")]
    assert space_issues({"callbacks": {"choice": ["mypkg.cb:MyCallbacks"]}}, ["mypkg"]) == []
    assert locs(space_issues({"callbacks": {"choice": ["mypkg.cb:MyCallbacks"]}}))


def test_space_choice_of_dicts_is_walked():
    space = {
        "replay_buffer_config": Domain(
            choice=[
                {"type": "PrioritizedEpisodeReplayBuffer", "alpha": 0.6},
                {"type": ATTACK},
            ]
        )
    }
    found = space_issues(space)
    assert [(i.loc, i.value) for i in found] == [("search.space.replay_buffer_config.type", ATTACK)]


def test_space_env_and_grid_values_are_checked():
    found = space_issues({"env": {"choice": ["CartPole-v1", "this:CartPole-v1"]}})
    assert [(i.loc, i.value) for i in found] == [("search.space.env", "this:CartPole-v1")]
    found = space_issues({"callbacks_class": {"grid": ["os.abort", "os.abort"]}})
    assert locs(found) == ["search.space.callbacks_class"]  # one issue per place and value


def test_space_dotted_keys_name_nested_settings():
    found = space_issues({"model.custom_model": {"choice": ["os.abort"]}})
    assert locs(found) == ["search.space.model.custom_model"]
    found = space_issues({"replay_buffer_config.type": {"choice": ["os.abort"]}})
    assert locs(found) == ["search.space.replay_buffer_config.type"]


def test_ordinary_space_passes():
    space = {
        "lr": Domain(loguniform=(1e-5, 1e-3)),
        "gamma": {"choice": [0.98, 0.99]},
        "model.fcnet_activation": {"choice": ["relu", "tanh"]},
        "env_config.difficulty": {"grid": ["easy", "hard"]},
        "num_epochs": {"randint": [1, 10]},
        "replay_buffer_config": {"choice": [{"type": "EpisodeReplayBuffer"}]},
    }
    assert space_issues(space) == []


# ---------------------------------------------------------------- module prefixes


@pytest.mark.parametrize(
    ("path", "allowed", "ok"),
    [
        ("mypkg", ["mypkg"], True),
        ("mypkg:Name", ["mypkg"], True),
        ("mypkg.sub.mod:Name", ["mypkg"], True),
        ("mypkg.sub:Name", ["mypkg.sub"], True),
        ("mypkgx:Name", ["mypkg"], False),
        ("mypkgx.sub:Name", ["mypkg"], False),
        ("mypkg:Name", ["mypkg.sub"], False),
        ("mypkg:Name", [], False),
        ("mypkg:Name", [""], False),
        ("mypkg:Name", [" mypkg "], True),
        ("os:system", ["mypkg", "other"], False),
        ("mypkg..x:Name", ["mypkg"], False),
        (".mypkg:Name", ["mypkg"], False),
    ],
)
def test_module_allowed(path, allowed, ok):
    assert module_allowed(path, allowed) is ok


# ---------------------------------------------------------------- nothing is imported


class _Recorder:
    """A meta-path finder that records every import attempted while it is installed."""

    def __init__(self):
        self.names = []

    def find_spec(self, name, path=None, target=None):
        self.names.append(name)
        return None


def test_checking_imports_nothing_a_spec_names(monkeypatch):
    probe = "tuner_probe_never_imported"
    recorder = _Recorder()
    monkeypatch.setattr(sys, "meta_path", [recorder, *sys.meta_path])
    before = set(sys.modules)
    config = {
        "callbacks": f"{probe}.cb:MyCallbacks",
        "replay_buffer_config": {"type": f"{probe}_2.buffers.Buffer"},
        "env_to_module_connector": f"{probe}_3:build",
        "env": f"{probe}_4.envs:MyEnv",
    }
    found = issues(config, [probe, f"{probe}_3", f"{probe}_4"])
    space = {"callbacks": {"choice": [f"{probe}_5:A", f"{probe}_6.x.Y"]}}
    found += space_issues(space, [f"{probe}_5"])
    assert locs(found) == ["config.replay_buffer_config.type", "search.space.callbacks"]
    assert not [n for n in recorder.names if n.startswith(probe)]
    assert not [m for m in set(sys.modules) - before if m.startswith(probe)]


# ---------------------------------------------------------------- resolving (driver)


def test_resolve_imports_allowed_paths_and_leaves_short_names(tmp_path, monkeypatch):
    pkg = tmp_path / "tuner_probe_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "cb.py").write_text("class MyCallbacks:\n    pass\n\ndef build(*a):\n    return a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    config = {
        "callbacks": "tuner_probe_pkg.cb:MyCallbacks",
        "env_to_module_connector": "tuner_probe_pkg.cb:build",
        "replay_buffer_config": {"type": "PrioritizedEpisodeReplayBuffer", "capacity": 10},
        "env": "tuner_probe_pkg.cb:MyEnv",  # envs are registered by tuner, left as written
        "lr": 0.1,
    }
    out = resolve_code_refs(config, allowed_modules=["tuner_probe_pkg"])
    assert out["callbacks"].__name__ == "MyCallbacks"
    assert out["env_to_module_connector"].__name__ == "build"
    assert out["replay_buffer_config"] == config["replay_buffer_config"]
    assert out["env"] == "tuner_probe_pkg.cb:MyEnv"
    assert config["callbacks"] == "tuner_probe_pkg.cb:MyCallbacks"  # input untouched
    assert resolve_code_refs(out, allowed_modules=["tuner_probe_pkg"]) == out  # idempotent
    sys.modules.pop("tuner_probe_pkg.cb", None)
    sys.modules.pop("tuner_probe_pkg", None)


def test_resolve_refuses_before_importing():
    with pytest.raises(SpecError) as exc:
        resolve_code_refs(
            {"callbacks": "tuner_probe_pkg_absent.cb:X", "sample_collector": "os.abort"},
            allowed_modules=["tuner_probe_pkg_absent"],
        )
    assert locs(exc.value.issues) == ["config.sample_collector"]
    assert "tuner_probe_pkg_absent" not in sys.modules


# ---------------------------------------------------------------- in the trial

OWN_BUFFER = "tuner_examples.buffers:CountingReplayBuffer"


def _dqn_spec(**patch):
    from tuner.spec import parse_spec

    data = {
        "name": "own-buffer",
        "algorithm": "DQN",
        "env": "CartPole-v1",
        "config": {"replay_buffer_config": {"type": OWN_BUFFER, "capacity": 2000}},
        "resources": {"num_env_runners": 0},
    }
    return parse_spec({**data, **patch})


def test_the_driver_imports_nothing_and_hands_the_trial_the_paths(monkeypatch):
    """build_config (the driver, and the API's validator for the fit check and the plan)
    keeps an import path away from RLlib, which would import it itself while building the
    config (the module "pkg" of "pkg.mod:Name", and keep that module as the type)."""
    from tuner.rllib import CODE_KEY, build_config
    from tuner.sweep import trial_params

    probe = "tuner_probe_buffers_never_imported"
    recorder = _Recorder()
    monkeypatch.setattr(sys, "meta_path", [recorder, *sys.meta_path])
    path = f"{probe}.sub:Buffer"
    spec = _dqn_spec(config={"replay_buffer_config": {"type": path}})
    build_config(spec)
    params = trial_params(spec)
    assert params["replay_buffer_config"]["type"] == path  # as the spec gives it
    assert params[CODE_KEY]["paths"] == [path]
    assert not [n for n in recorder.names if n.startswith(probe)]


def test_the_trial_gives_rllib_the_class_of_an_allowed_path():
    """`config.replay_buffer_config.type: "pkg.mod:Name"` reached RLlib as a string, which
    its from_config cannot build ("must be a valid full [module].[class]"); the trial now
    imports it (config, model and sampled search-space values) before RLlib sees it."""
    from types import SimpleNamespace

    from tuner_examples.buffers import CountingReplayBuffer

    from tuner.ray_internals import MODEL_CONFIG_KEY
    from tuner.rllib._trainables import TunerDQN, _SweepTrialMixin
    from tuner.rllib._user_code import with_user_code
    from tuner.sweep import trial_params

    spec = _dqn_spec(
        model={"fcnet_hiddens": [16], "probe_class": OWN_BUFFER},
        search={"space": {"replay_buffer_config": {"choice": [{"type": OWN_BUFFER}]}}},
    )
    params = trial_params(spec)
    TunerDQN.default_resource_request(params)  # Tune asks in the driver, paths as strings
    sampled = {**params, "replay_buffer_config": {"type": OWN_BUFFER, "capacity": 500}}
    config = with_user_code(sampled)
    assert config["replay_buffer_config"] == {"type": CountingReplayBuffer, "capacity": 500}
    assert config[MODEL_CONFIG_KEY]["probe_class"] is CountingReplayBuffer
    assert config[MODEL_CONFIG_KEY]["fcnet_hiddens"] == [16]
    rllib = TunerDQN.get_default_config().update_from_dict(config)
    rllib.validate()
    assert rllib.replay_buffer_config["type"] is CountingReplayBuffer
    # RLlib 2.60 tests `"EpisodeReplayBuffer" in type` (a TypeError on a class): the
    # trial builds the buffer from the class itself
    trial = SimpleNamespace(config=rllib)

    def rllibs_own(config):
        raise AssertionError("RLlib's own builder would fail on a class")

    buffer = _SweepTrialMixin.tuner_replay_buffer(trial, rllib, rllibs_own)
    assert type(buffer) is CountingReplayBuffer
    assert buffer.capacity == 500
