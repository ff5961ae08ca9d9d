"""The update ratio and batch a performance default must keep, and the env count it may
add: DQN/SAC's sample rounds (a held training_intensity), the vectorised envs of DQN's
flat replay path and of PPO (as many as leave each env MIN_STEPS_PER_ENV steps of a
batch); a searched `updates_per_env_step` as the training_intensity it gives; and what a
trial derives beyond its spec, as it ran."""

from __future__ import annotations

from typing import Any

from ray.rllib.algorithms.algorithm_config import AlgorithmConfig

from tuner import algorithms as registry
from tuner.rllib._settings import (
    _chosen,
    _performance_defaults,
    code_settings,
    default_config,
    fixed_settings,
    flat_defaults_apply,
    vector_defaults_apply,
)
from tuner.rllib._trial_config import (
    CONFIRM_KEY,
    FLAT_DEFAULTS_KEY,
    HOLD_RATIO_KEY,
    VECTOR_ENVS_KEY,
    apply_values,
)
from tuner.search_spaces import UPDATES_PER_ENV_STEP
from tuner.spec import ExperimentSpec

# rl-zoo3's smallest n_steps (its sampler's 2^5), the per-env rollout of its tuned
# CartPole PPO (8 envs x 32 steps): shorter runs are cut and bootstrapped, as SB3's are.
MIN_STEPS_PER_ENV = 32


_RATIO_KEYS = ("rollout_fragment_length", "training_intensity")


_ENVS = "num_envs_per_env_runner"


def num_envs_of(spec: ExperimentSpec) -> int:
    """Vectorised envs per env runner: the spec's; where it sets none, those of the
    flat_replay_defaults or the performance_defaults where they apply; else 1."""
    if flat_defaults_apply(spec):
        return int(registry.get(spec.algorithm).flat_replay_defaults.get(_ENVS, 1))
    if vector_defaults_apply(spec):
        cfg = default_config(spec.algorithm)
        code = code_settings(spec)
        cfg.update_from_dict({k: v for k, v in fixed_settings(spec).items() if k not in code})
        cfg.learners(num_learners=spec.resources.num_learners)
        runners = spec.resources.num_env_runners
        return envs_for_batch(cfg.total_train_batch_size, runners, most_vector_envs(spec))
    return own_num_envs(spec)


def most_vector_envs(spec: ExperimentSpec) -> int:
    """The most envs per env runner a trial takes.

    The env count of the algorithm's vectorised performance default (PPO: 8), or the
    env's base setting (rl-zoo3's n_envs: CartPole 8, LunarLander 16, MuJoCo 1), which a
    trial takes where its batch is large enough (envs_for_batch).

    Args:
        spec: The sweep's spec.

    Returns:
        The env count.
    """
    base = spec.base.num_envs_per_env_runner
    if base is not None:
        return int(base)
    return int(registry.get(spec.algorithm).performance_defaults[_ENVS])


def envs_for_batch(total_batch: int, runners: int, most: int) -> int:
    """The env count of a vectorised default for a train batch: up to `most`, fewer so
    that each env samples at least MIN_STEPS_PER_ENV steps of every batch (over no
    remote env runners: 256 or more: 8; 128: 4; under 64: 1)."""
    per_env = MIN_STEPS_PER_ENV * max(int(runners), 1)
    return max(1, min(int(most), int(total_batch) // per_env))


def _trial_rllib_config(config: dict[str, Any], algorithm: str) -> AlgorithmConfig:
    """The RLlib config a trial's config dict (without its markers) builds."""
    cfg = default_config(algorithm)
    return cfg.update_from_dict({k: v for k, v in config.items() if not k.startswith("_tuner")})


def vector_envs(config: dict[str, Any], algorithm: str) -> dict[str, Any]:
    """A trial config with the env count its own train batch gets (envs_for_batch; the
    batch may be sampled), where VECTOR_ENVS_KEY says a vectorised default is in force."""
    out = {k: v for k, v in config.items() if k != VECTOR_ENVS_KEY}
    most = config.get(VECTOR_ENVS_KEY)
    if not most:
        return out
    cfg = _trial_rllib_config(out, algorithm)
    out[_ENVS] = envs_for_batch(cfg.total_train_batch_size, cfg.num_env_runners, int(most))
    return out


def updates_as_intensity(config: dict[str, Any], algorithm: str) -> dict[str, Any]:
    """A trial config with a sampled `updates_per_env_step` set as RLlib's training_intensity.

    Samples trained per env step = updates per env step x the trial's total train batch
    (train_batch_size_per_learner x learners: each update one train batch, as RLlib's
    calculate_rr_weights reads the intensity); with remote env runners the intensity is
    that over round_robin_excess, so the trial trains the ratio asked. The key stays
    beside it, an attribute RLlib keeps and ignores, so the config RLlib reports back (a
    result's, a checkpoint's) still names the value searched. Without the key: the
    config as it is.

    Args:
        config: The trial's config dict.
        algorithm: The spec's algorithm.

    Returns:
        The config dict with its training_intensity.
    """
    if UPDATES_PER_ENV_STEP not in config:
        return config
    out = dict(config)
    cfg = _trial_rllib_config(out, algorithm)
    samples = float(config[UPDATES_PER_ENV_STEP]) * cfg.total_train_batch_size
    out["training_intensity"] = samples / round_robin_excess(cfg.num_env_runners)
    return out


def round_robin_excess(num_env_runners: int) -> float:
    """How many times the samples per env step asked by a training_intensity it trains.

    RLlib's round robin (dqn.py calculate_rr_weights, and the flat path, which makes the
    same updates) counts the local env runner among the samplers (runners + 1) in its
    native ratio, but with remote env runners only those sample, so an intensity trains
    (runners + 1) / runners x itself; without remote ones, exactly itself.

    Args:
        num_env_runners: The trial's remote env runners.

    Returns:
        The factor.
    """
    return (num_env_runners + 1) / num_env_runners if num_env_runners > 0 else 1.0


def as_trial_runs(config: dict[str, Any], algorithm: str) -> dict[str, Any]:
    """A trial's config dict as the trial runs it.

    Its update ratio (updates_as_intensity: training_intensity beside the searched key),
    env count (vector_envs) and held update ratio (hold_update_ratio) set, the markers
    gone.

    Args:
        config: The trial's config dict.
        algorithm: The spec's algorithm.

    Returns:
        The config dict.
    """
    config = updates_as_intensity(config, algorithm)
    return hold_update_ratio(vector_envs(config, algorithm), algorithm)


def holds_update_ratio(spec: ExperimentSpec) -> bool:
    """Whether each of the spec's trials holds RLlib's default update ratio.

    So where they run with a performance default's rollout_fragment_length that nothing
    in the spec (preset, `config`, search space) overrides or pairs with its own
    training_intensity (or updates_per_env_step).

    Args:
        spec: The sweep's spec.

    Returns:
        True where they hold it.
    """
    if spec.custom_algorithm:
        return False
    if "rollout_fragment_length" not in _performance_defaults(spec):
        return False
    return not _chosen(spec) & {*_RATIO_KEYS, UPDATES_PER_ENV_STEP}


def own_num_envs(spec: ExperimentSpec) -> int:
    """The envs per env runner the spec itself asks for.

    1 unless it sets resources.num_envs_per_env_runner: what a trial's HOLD_RATIO_KEY
    carries (the ratio held is RLlib's default for those, not for the envs a performance
    default adds) and what evaluation runs on.

    Args:
        spec: The sweep's spec.

    Returns:
        The env count.
    """
    return spec.resources.num_envs_per_env_runner or 1


def _auto_fragment(n_step: Any) -> int:
    # RLlib's DQN/SAC `rollout_fragment_length: auto` is the (largest) n-step
    return int(n_step[1] if isinstance(n_step, list | tuple) else n_step or 1)


def hold_update_ratio(config: dict[str, Any], algorithm: str) -> dict[str, Any]:
    """A DQN/SAC trial config with `rollout_fragment_length` from the performance defaults
    and the training_intensity that keeps RLlib's default update ratio (samples trained
    per env step): what `rollout_fragment_length: auto` and no training_intensity give,
    total_train_batch_size / (n_step x envs x (env runners + 1)) in RLlib's own formula
    (dqn.py calculate_rr_weights), envs being the spec's own (HOLD_RATIO_KEY:
    own_num_envs), not those the flat_replay_defaults add. The fragment is rounded
    to a multiple of the auto one, so the updates per sample round come out whole and the
    ratio exact. Only the order changes: R env steps, then R/n_step updates, instead of
    alternating them one by one."""
    out = {k: v for k, v in config.items() if k != HOLD_RATIO_KEY}
    held = config.get(HOLD_RATIO_KEY)
    exact = bool(config.get(FLAT_DEFAULTS_KEY))  # the flat path counts updates exactly
    if not held or out.get("training_intensity"):
        return out
    cfg = _trial_rllib_config(out, algorithm)
    auto = _auto_fragment(cfg.n_step)
    fragment = out.get("rollout_fragment_length")
    if not isinstance(fragment, int):
        return out
    if not exact:  # RLlib's round robin: whole updates per round
        out["rollout_fragment_length"] = auto * max(1, round(fragment / auto))
    own_envs = cfg.num_envs_per_env_runner if held is True else int(held)
    envs = own_envs * max(cfg.num_env_runners + 1, 1)
    out["training_intensity"] = cfg.total_train_batch_size / (auto * envs)
    return out


def derived_settings(
    trial_config: dict[str, Any], spec: ExperimentSpec
) -> tuple[dict[str, Any], dict[str, Any]]:
    """What a trial ran with beyond its spec, as it ran.

    The config ones are the training_intensity a sampled updates_per_env_step gives, or
    the held update ratio (the training_intensity hold_update_ratio sets, with the
    rollout_fragment_length as rounded for it); the resources one a
    performance default's env count (DQN's flat path, PPO), and then, where the spec
    evaluates, evaluation's own env count under `evaluation_config` among the config
    ones (a spec that sets the env count itself evaluates on as many). The spec's
    `config` with the first and its `resources` with the second rerun the trial as it
    ran.

    Args:
        trial_config: The trial's config dict.
        spec: The sweep's spec.

    Returns:
        (config settings, resources).
    """
    if spec.custom_algorithm:  # its own loop: nothing of RLlib's is derived
        return {}, {}
    confirm = trial_config.get(CONFIRM_KEY)
    if isinstance(confirm, dict):  # a confirmation trial runs its candidate's values
        rest = {k: v for k, v in trial_config.items() if k != CONFIRM_KEY}
        trial_config = apply_values(rest, confirm["values"])
    config: dict[str, Any] = {}
    ran = as_trial_runs(trial_config, spec.algorithm)
    if UPDATES_PER_ENV_STEP in trial_config:
        config = {"training_intensity": ran["training_intensity"]}
    elif HOLD_RATIO_KEY in trial_config and not trial_config.get("training_intensity"):
        config = {k: ran[k] for k in _RATIO_KEYS if k in ran}
    envs = ran.get(_ENVS)
    resources = {_ENVS: envs} if envs is not None and envs != own_num_envs(spec) else {}
    if resources and spec.evaluation.enabled:
        evaluation = dict(fixed_settings(spec).get("evaluation_config") or {})
        config["evaluation_config"] = {**evaluation, _ENVS: own_num_envs(spec)}
    return config, resources


def update_ratio(config: AlgorithmConfig) -> float:
    """Samples trained per env step sampled that a DQN/SAC config gives.

    RLlib's round robin of sampling and training, dqn.py calculate_rr_weights.

    Args:
        config: The algorithm's config.

    Returns:
        The ratio.
    """
    from ray.rllib.algorithms.dqn.dqn import calculate_rr_weights

    store, train = calculate_rr_weights(config)
    sampled = store * config.get_rollout_fragment_length() * config.num_envs_per_env_runner
    return train * config.total_train_batch_size / (sampled * max(config.num_env_runners, 1))
