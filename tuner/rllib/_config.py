"""From a spec to one trial's RLlib AlgorithmConfig (before sampling) and the trainable
that runs it."""

from __future__ import annotations

from typing import Any

from ray.rllib.algorithms.algorithm_config import AlgorithmConfig

from tuner.rllib._envs import env_config_for
from tuner.rllib._envs import env_name as _env_name
from tuner.rllib._multi_agent import apply_multi_agent
from tuner.rllib._observations import mean_std_connector, mean_std_connector_multi_agent
from tuner.rllib._settings import code_settings, fixed_settings, vector_defaults_apply
from tuner.rllib._trainables import TRAINABLES
from tuner.rllib._trial_config import apply_values
from tuner.rllib._update_ratio import _ENVS, num_envs_of, own_num_envs, updates_as_intensity
from tuner.search_spaces import UPDATES_PER_ENV_STEP
from tuner.spec import ExperimentSpec


def trainable_for(spec: ExperimentSpec) -> Any:
    """The trainable that runs the spec's trials.

    Args:
        spec: The sweep's spec.

    Returns:
        An RLlib algorithm class, or the spec's own training loop wrapped
        (tuner.rllib._custom).
    """
    if spec.custom_algorithm:
        from tuner.rllib._custom import custom_trainable

        return custom_trainable(spec.algorithm)
    return TRAINABLES[spec.base_algorithm]


def build_config(spec: ExperimentSpec, env_name: str | None = None) -> AlgorithmConfig:
    """The AlgorithmConfig of one trial before sampling.

    Preset, user config, env, resources, model, multi-agent policies, evaluation and
    seed. Settings that name code by import path (code_settings) are left out: the trial
    sets them (trial_params).

    Args:
        spec: The sweep's spec.
        env_name: The env's name as registered with Tune (register_env); default the
            spec's `env`.

    Returns:
        The config.
    """
    trainable = trainable_for(spec)
    config = trainable.get_default_config()
    fixed = fixed_settings(spec)
    model = fixed.pop("model_config", None) or {}
    code = code_settings(spec)
    config.update_from_dict({k: v for k, v in fixed.items() if k not in code})
    r = spec.resources
    envs = num_envs_of(spec)
    config.environment(
        env=env_name or _env_name(spec.env, spec.wrappers),
        env_config=env_config_for(spec.env_config, spec.wrappers),
    )
    config.env_runners(
        num_env_runners=r.num_env_runners,
        num_envs_per_env_runner=envs,
        num_cpus_per_env_runner=r.num_cpus_per_env_runner,
        num_gpus_per_env_runner=r.num_gpus_per_env_runner,
    )
    config.learners(num_learners=r.num_learners, num_gpus_per_learner=r.num_gpus_per_learner)
    config.resources(
        num_cpus_for_main_process=r.num_cpus_for_main_process,
        placement_strategy=r.placement_strategy,
    )
    if model or spec.model:
        config.rl_module(model_config={**model, **spec.model})
    if spec.observations_normalized:
        multi = spec.multi_agent is not None
        connector = mean_std_connector_multi_agent if multi else mean_std_connector
        config.env_runners(env_to_module_connector=connector)
    if spec.multi_agent is not None:
        apply_multi_agent(config, spec.multi_agent)
    if spec.evaluation.interval:
        # evaluation.at_end is the trial's own (_trainables): no RLlib evaluation runner
        # is built for it
        config.evaluation(
            evaluation_interval=spec.evaluation.interval,
            evaluation_duration=spec.evaluation.duration,
            evaluation_duration_unit="episodes",
            # the policy as it is used: deterministic actions (the spec's own
            # evaluation_config wins)
            evaluation_config={"explore": False, **(config.evaluation_config or {})},
        )
        if envs != own_num_envs(spec) or vector_defaults_apply(spec):
            # evaluation keeps the spec's own env count (a trial's own batch may give it
            # more: vector_envs): RLlib's episode-count evaluation over parallel envs
            # returns the first episodes to end, the shorter ones
            own = {_ENVS: own_num_envs(spec)}
            config.evaluation(evaluation_config={**own, **(config.evaluation_config or {})})
    config.debugging(seed=spec.seed)
    return config


def rerun_config(
    spec: ExperimentSpec, derived: dict[str, Any], sampled: dict[str, Any]
) -> dict[str, Any]:
    """The settings that rerun a trial as it ran, pasted under a spec's `config`.

    The spec's fixed settings, what the trial derived and its sampled values, over each
    other. A sampled `updates_per_env_step` (a search-space key, refused under `config`)
    gives way to the training_intensity it set: the derived one, or, where the trial's
    Tune config is gone (a row read back from the store), the one it sets over the
    spec's built config. A training loop of the spec's own keeps its values as they are.

    Args:
        spec: The sweep's spec.
        derived: The trial's derived config settings (derived_settings).
        sampled: The trial's sampled values.

    Returns:
        The settings.
    """
    out = {**fixed_settings(spec), **derived, **sampled}
    if spec.custom_algorithm or UPDATES_PER_ENV_STEP not in out:
        return out
    if "training_intensity" not in derived:
        params = apply_values(build_config(spec).to_dict(), sampled)
        out["training_intensity"] = updates_as_intensity(params, spec.algorithm)[
            "training_intensity"
        ]
    del out[UPDATES_PER_ENV_STEP]
    return out
