"""Every data file of tuner/ has a schema that refuses unknown keys: each shipped file
loads, and a copy with one unknown key (at its top level and at a nested one) is refused
by the real loader with an error that names the key and the file."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

import tuner
from tuner.algorithms import _registry
from tuner.data_files import DataFileError
from tuner.ray_internals import read_private_names
from tuner.search_spaces import _env_settings
from tuner.spec import _code_refs, _schedule

PACKAGE = Path(tuner.__file__).parent


def shipped(relative: str) -> Any:
    return yaml.safe_load((PACKAGE / relative).read_text())


def refused(tmp_path: Path, data: Any, load: Callable[[Path], Any], *named: str) -> str:
    """Writes `data` to a file, loads it with `load`; the error names the file and `named`."""
    path = tmp_path / "copy.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(DataFileError) as err:
        load(path)
    message = str(err.value)
    assert str(path) in message, message
    assert err.value.path == path, message
    for word in named:
        assert word in message, (word, message)
    return message


def with_key(data: Any, where: tuple[str | int, ...], key: str, value: Any) -> Any:
    """A deep copy of `data` with `key: value` added to the mapping at `where`."""
    out = copy.deepcopy(data)
    node = out
    for part in where:
        node = node[part]
    node[key] = value
    return out


# -- algorithms.yaml (tuner/algorithms/_schema.py AlgorithmsFile) -----------------------------


def test_algorithms_yaml(tmp_path):
    def load(path: Path) -> Any:
        return _registry._entries(algorithms_file=path)

    data = shipped("algorithms/algorithms.yaml")
    assert list(load(PACKAGE / "algorithms/algorithms.yaml"))[:5] == list(data)
    # its top level names the algorithms: a key indented one level too little is refused
    stray = with_key(data, (), "flat_replay_defaults", {"rollout_fragment_length": 4})
    refused(tmp_path, stray, load, "flat_replay_defaults.rollout_fragment_length: unknown key")
    typo = with_key(data, ("PPO",), "gpu_learners", True)
    refused(tmp_path, typo, load, "PPO.gpu_learners: unknown key")
    wrong = with_key(data, ("SAC",), "actions", ["continous"])
    refused(tmp_path, wrong, load, "SAC.actions.0", "continous")


# -- presets.yaml (tuner/algorithms/_schema.py PresetsFile) -----------------------------------


def test_presets_yaml(tmp_path):
    def load(path: Path) -> Any:
        return _registry._entries(presets_file=path)

    data = shipped("algorithms/presets.yaml")
    assert set(data) <= set(load(PACKAGE / "algorithms/presets.yaml"))
    stray = with_key(data, (), "warnings", ["noisy=True has no effect"])
    refused(tmp_path, stray, load, "warnings:")
    typo = with_key(data, ("Rainbow_DQN",), "warning", ["noisy=True has no effect"])
    refused(tmp_path, typo, load, "Rainbow_DQN.warning: unknown key")
    # a preset runs on an algorithm of algorithms.yaml; one named like one, on that one
    unknown = with_key(data, ("Double_DQN",), "algorithm", "DQNN")
    refused(tmp_path, unknown, load, "Double_DQN.algorithm", "'DQNN'")
    other = with_key(data, ("APPO",), "algorithm", "PPO")
    refused(tmp_path, other, load, "APPO.algorithm", "'PPO'")


# -- search_spaces/defaults.yaml (tuner/algorithms/_schema.py SpacesFile) ---------------------


def test_default_spaces_yaml(tmp_path):
    def load(path: Path) -> Any:
        return _registry._entries(spaces_file=path)

    data = shipped("search_spaces/defaults.yaml")
    entries = load(PACKAGE / "search_spaces/defaults.yaml")
    assert all(entries[name].default_space for name in data)
    # a top-level name must be an algorithm: a typo would leave PPO without a space
    typo_name = {("PP0" if k == "PPO" else k): v for k, v in data.items()}
    refused(tmp_path, typo_name, load, "PP0: not an algorithm of algorithms.yaml")
    stray = with_key(data, ("PPO",), "budgets", {})
    refused(tmp_path, stray, load, "PPO.budgets: unknown key")
    nested = with_key(data, ("PPO", "budget", "minibatch_size"), "at_most_fractions", 0.1)
    refused(tmp_path, nested, load, "PPO.budget.minibatch_size.at_most_fractions: unknown key")
    domain = with_key(data, ("PPO", "space"), "lr", {"logunifrom": [1.0e-5, 3.0e-3]})
    refused(tmp_path, domain, load, "PPO.space.lr.logunifrom: unknown key")
    schedule = with_key(data, ("DQN", "budget", "epsilon", "schedule"), "final", [0.1])
    refused(tmp_path, schedule, load, "DQN.budget.epsilon.schedule.final: unknown key")
    # a `why` for a key the space does not search is a typo too
    why = with_key(data, ("PPO", "why"), "lamda", "GAE's bias/variance trade-off")
    refused(tmp_path, why, load, "PPO", "lamda")


# -- search_spaces/env_settings.yaml (tuner/search_spaces/_env_settings.py EnvSettingsFile) ----


def test_env_settings_yaml(tmp_path):
    data = shipped("search_spaces/env_settings.yaml")
    table = _env_settings._table(PACKAGE / "search_spaces/env_settings.yaml")
    assert list(table) == list(data)
    assert table["CartPole"]["PPO"].num_envs_per_env_runner == 8
    # the top two levels name envs and algorithms: a settings key there is not a mapping
    stray = with_key(data, (), "normalize_observations", True)
    refused(tmp_path, stray, _env_settings._table, "normalize_observations:")
    typo = with_key(data, ("Acrobot", "PPO"), "normalise_observations", True)
    refused(tmp_path, typo, _env_settings._table, "Acrobot.PPO.normalise_observations: unknown key")


# -- spec/scheduler_defaults.yaml (tuner/spec/_schedule.py SchedulerDefaults) -----------------


def test_scheduler_defaults_yaml(tmp_path):
    data = shipped("spec/scheduler_defaults.yaml")
    rules = _schedule._rules(PACKAGE / "spec/scheduler_defaults.yaml")
    assert rules.asha.fallback.model_dump() == data["asha"]["fallback"]
    top = with_key(data, (), "bohb", {"reduction_factor": 3})
    refused(tmp_path, top, _schedule._rules, "bohb: unknown key")
    brackets = with_key(data, ("hyperband",), "max_brackets", 0)
    refused(tmp_path, brackets, _schedule._rules, "hyperband.max_brackets:")
    nested = with_key(data, ("asha", "fallback"), "grace", 1)
    refused(tmp_path, nested, _schedule._rules, "asha.fallback.grace: unknown key")
    missing = copy.deepcopy(data)
    del missing["median"]["grace_fraction"]
    refused(tmp_path, missing, _schedule._rules, "median.grace_fraction: missing (required)")
    sampler = with_key(data, ("optuna",), "sampler", "cmaes")
    refused(tmp_path, sampler, _schedule._rules, "optuna.sampler:")


# -- spec/rllib_classes.yaml (tuner/spec/_code_refs.py RllibClassesFile) ----------------------


def test_rllib_classes_yaml(tmp_path):
    data = shipped("spec/rllib_classes.yaml")
    rules = _code_refs._rules(PACKAGE / "spec/rllib_classes.yaml")
    assert rules.type_names["replay_buffers"] == tuple(data["type_names"]["replay_buffers"])
    top = with_key(data, (), "code_key_suffix", ["_cls"])
    refused(tmp_path, top, _code_refs._rules, "code_key_suffix: unknown key")
    nested = with_key(data, ("type_names",), "policies", ["PPOTorchPolicy"])
    refused(tmp_path, nested, _code_refs._rules, "type_names.policies: unknown key")
    family = with_key(data, ("type_families",), "replay_buffer_config", "replay_bufers")
    refused(tmp_path, family, _code_refs._rules, "replay_buffer_config", "replay_bufers")


# -- ray_internals.yaml (tuner/ray_internals/_names.py PrivateNamesFile) ---------------------


def test_ray_internals_yaml(tmp_path):
    data = shipped("ray_internals/ray_internals.yaml")
    names = read_private_names(PACKAGE / "ray_internals" / "ray_internals.yaml")
    assert read_private_names() == names  # the loader's default: the file shipped
    assert [n.model_dump() for n in names] == data
    # a list of entries: an unknown key in one, an unknown kind of use
    typo = with_key(data, (0,), "reason", "why, misspelt")
    refused(tmp_path, typo, read_private_names, "0.reason: unknown key")
    kind = with_key(data, (1,), "kind", "attribut")
    refused(tmp_path, kind, read_private_names, "1.kind", "'attribut'")


def test_an_error_lists_every_problem_of_a_file(tmp_path):
    data = shipped("spec/scheduler_defaults.yaml")
    both = with_key(with_key(data, (), "pbt", {}), ("median",), "grace", 1)
    message = refused(tmp_path, both, _schedule._rules, "pbt: unknown key", "median.grace")
    assert message.count("unknown key") == 2


def test_a_file_that_is_not_yaml_is_named(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("asha: [1, 2\n")
    with pytest.raises(DataFileError, match="broken.yaml: not YAML"):
        _schedule._rules(path)
