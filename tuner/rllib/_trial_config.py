"""What a trial's config dict carries besides RLlib's settings, and where: the search-space
keys' paths in RLlib's config dict, the markers a sweep lays in for its trials (`_tuner_*`),
and each trial's seed (spec seed + trial index, or a confirmation trial's own).

Plain functions over dicts: the driver, the trackers and the trials read the same."""

from __future__ import annotations

import copy
import hashlib
from typing import Any

from ray.tune.result import TRIAL_INFO

from tuner.mlflow_names import STAGE_CONFIRM, STAGE_SEARCH, STEP_KEY
from tuner.ray_internals import MODEL_CONFIG_KEY, config_key

MODEL_PREFIX = "model."


ENV_CONFIG_PREFIX = "env_config."


# A confirmation trial's config carries the values and seed it re-runs under this key;
# the trial applies them before RLlib sees its config.
CONFIRM_KEY = "_tuner_confirm"


# The spec's own code by import path (callbacks, module, and the paths its RLlib settings
# name at code positions): the trial imports it, so the driver's config stays plain data
# and the API process never imports user code.
CODE_KEY = "_tuner_code"


# Set when a performance default's rollout_fragment_length is in force and nothing in the
# spec sets the update ratio: the trial then holds RLlib's default ratio (hold_update_ratio).
HOLD_RATIO_KEY = "_tuner_hold_update_ratio"


# Set when the algorithm's flat_replay_defaults are in force (flat_defaults_apply): the
# trial must then take the flat replay path, which counts its updates exactly.
FLAT_DEFAULTS_KEY = "_tuner_flat_defaults"


# Set when a performance default's env count is in force for on-policy sampling
# (vector_defaults_apply): the most envs; the trial takes fewer where its train batch is
# small (vector_envs), so each env samples at least MIN_STEPS_PER_ENV steps of a batch.
VECTOR_ENVS_KEY = "_tuner_vector_envs"
# A searcher's trial (optuna) has a random id with no index: the searcher sets its 0-based
# index here, in the order it suggests trials, so the spec's seed gives the same trial
# seeds on every run (what a Tune-named trial's id ending gives: 'a1b2c_00003' -> 3).
INDEX_KEY = "_tuner_index"
CHECKPOINT_META = "tuner.json"  # env and algorithm of a checkpoint, for `tuner evaluate`
# Set with evaluation.at_end: the budget ({"env_steps": stop.timesteps_total, "iterations":
# stop.training_iteration}, either may be None) at whose end the trial evaluates its
# final policy.
FINAL_EVAL_KEY = "_tuner_final_eval"


def config_path(key: str, config: dict[str, Any]) -> tuple[str, ...]:
    """Where a search-space key lives in a config dict (AlgorithmConfig.to_dict()).

    Its own name, or the private name RLlib keeps a property under
    (`train_batch_size_per_learner` -> `_train_batch_size_per_learner`), so the value
    laid there is the one RLlib builds its config from and the one reported.

    Args:
        key: The search-space key (dotted for a nested setting).
        config: The config dict.

    Returns:
        The path of keys.
    """
    if key.startswith(MODEL_PREFIX):
        return (MODEL_CONFIG_KEY, key[len(MODEL_PREFIX) :])
    if key.startswith(ENV_CONFIG_PREFIX):
        return ("env_config", key[len(ENV_CONFIG_PREFIX) :])
    return (config_key(key, config),)


def sampled_values(trial_config: dict[str, Any], space_keys: list[str]) -> dict[str, Any]:
    """The values a trial ran with for each search-space key.

    Read where RLlib keeps them (a confirmation trial: the values it re-runs).

    Args:
        trial_config: The trial's config dict.
        space_keys: The search space's keys.

    Returns:
        Each key's value.
    """
    confirm = trial_config.get(CONFIRM_KEY)
    if isinstance(confirm, dict):
        return {key: confirm["values"].get(key) for key in space_keys}
    out = {}
    for key in space_keys:
        node: Any = trial_config
        for part in config_path(key, trial_config):
            node = node.get(part) if isinstance(node, dict) else None
        out[key] = node
    return out


def apply_values(config: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """A copy of a config dict with search-space values set where RLlib keeps them.

    Dicts along each path are copied; the rest is shared.

    Args:
        config: The config dict.
        values: Each search-space key's value.

    Returns:
        The copy.
    """
    out = dict(config)
    for key, value in values.items():
        path = config_path(key, out)
        node = out
        for part in path[:-1]:
            node[part] = dict(node.get(part) or {})
            node = node[part]
        node[path[-1]] = copy.deepcopy(value)
    return out


def seed_of(trial_config: dict[str, Any], trial_id: str, base_seed: int) -> int:
    """The seed a trial runs with: a confirmation trial's own, else spec seed + index.

    Args:
        trial_config: The trial's config dict.
        trial_id: Tune's trial id.
        base_seed: The spec's seed.

    Returns:
        The seed.
    """
    confirm = trial_config.get(CONFIRM_KEY)
    if isinstance(confirm, dict):
        return int(confirm["seed"])
    return trial_seed(base_seed, search_index(trial_config, trial_id))


def stage_of(trial_config: dict[str, Any]) -> str:
    """The stage a trial belongs to.

    Args:
        trial_config: The trial's config dict.

    Returns:
        search, or confirm for a confirmation trial.
    """
    return STAGE_CONFIRM if isinstance(trial_config.get(CONFIRM_KEY), dict) else STAGE_SEARCH


def trial_seed(base_seed: int, trial_index: int) -> int:
    """The seed of trial `trial_index` (0-based) of a sweep whose spec seed is `base_seed`.

    Args:
        base_seed: The spec's seed.
        trial_index: The trial's index (trial_index).

    Returns:
        The seed.
    """
    return (base_seed + trial_index) % (2**31)


def search_index(trial_config: dict[str, Any], trial_id: str) -> int:
    """A search trial's index for its seed: the one its searcher set (INDEX_KEY), else
    the one its id carries (`trial_index`).

    Args:
        trial_config: The trial's config dict.
        trial_id: Tune's trial id.

    Returns:
        The index.
    """
    index = trial_config.get(INDEX_KEY)
    if isinstance(index, int) and not isinstance(index, bool):
        return index
    return trial_index(trial_id)


def trial_index(trial_id: str) -> int:
    """A trial's index for its seed, from its id.

    Tune's own variant generator ends a trial id in its 0-based creation index
    ('a1b2c_00003' -> 3). A searcher's trial (optuna) has a random hex id with no index:
    its searcher sets one (INDEX_KEY, `search_index`); an id without either (a sweep
    started before INDEX_KEY) gets a number from the id, far above any grid index, so
    every trial of a sweep still runs with its own seed.

    Args:
        trial_id: Tune's trial id.

    Returns:
        The index.
    """
    _, sep, tail = trial_id.rpartition("_")
    if sep and tail.isdigit():
        return int(tail)
    digest = hashlib.sha1(trial_id.encode()).hexdigest()
    return 1_000_000 + int(digest[:8], 16) % 1_000_000_000


def seeded_config(config: Any) -> Any:
    """A trial's config as it runs: a confirmation trial's values and seed laid in, a
    search trial's seed set from the spec seed and its index (Tune's TRIAL_INFO)."""
    if isinstance(config, dict) and isinstance(config.get(CONFIRM_KEY), dict):
        confirm = config[CONFIRM_KEY]
        rest = {k: v for k, v in config.items() if k != CONFIRM_KEY}
        config = apply_values(rest, confirm["values"])
        config["seed"] = int(confirm["seed"])
    elif isinstance(config, dict) and config.get(TRIAL_INFO) is not None:
        config = dict(config)
        index = search_index(config, config[TRIAL_INFO].trial_id)
        config["seed"] = trial_seed(int(config.get("seed") or 0), index)
    if isinstance(config, dict) and INDEX_KEY in config:  # not an RLlib setting
        config = {k: v for k, v in config.items() if k != INDEX_KEY}
    return config


def budget_spent(budget: dict[str, int | None], result: dict[str, Any], iteration: int) -> bool:
    """Whether a trial's result at `iteration` (1-based) reaches the end of its budget:
    stop.timesteps_total env steps sampled, or stop.training_iteration iterations (what
    the sweep's stop criteria end the trial at). False without a budget."""
    steps, iterations = budget.get("env_steps"), budget.get("iterations")
    if iterations and iteration >= iterations:
        return True
    sampled = result.get(STEP_KEY)
    if sampled is None:  # RLlib's own place for it, before Tune copies it to the top
        sampled = (result.get("env_runners") or {}).get(STEP_KEY)
    return bool(steps and isinstance(sampled, int | float) and sampled >= steps)
