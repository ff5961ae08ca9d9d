"""From a spec to RLlib.

The trial's AlgorithmConfig, the trainables (thin subclasses of RLlib's algorithms),
performance defaults and the update ratio they keep, DQN/SAC's flat replay path, SAC's
Q-network shapes, envs and wrappers, the spec's own code in a trial, multi-agent
mapping, a trial's resources, and evaluating a checkpoint.

A trial's process imports this package (it unpickles its trainable from here): nothing
in it imports the driver's Tune wiring, MLflow, Optuna or the store.
"""

from tuner.rllib._config import build_config, rerun_config, trainable_for
from tuner.rllib._custom import KINDS, custom_params, custom_resources, is_function, kind_of
from tuner.rllib._envs import check_env, load_object, make_env, register_env
from tuner.rllib._evaluate import Evaluation, NoTrackingStore, evaluate_checkpoint
from tuner.rllib._resources import alive_nodes, check_fits, trial_resources
from tuner.rllib._sac_model import Q_ENCODER, Q_ENCODERS
from tuner.rllib._settings import (
    code_settings,
    default_config,
    fixed_settings,
    flat_defaults_apply,
    preset_warnings,
    rllib_keys,
    vector_defaults_apply,
)
from tuner.rllib._trainables import TRAINABLES
from tuner.rllib._trial_config import (
    CHECKPOINT_META,
    CODE_KEY,
    CONFIRM_KEY,
    ENV_CONFIG_PREFIX,
    FINAL_EVAL_KEY,
    FLAT_DEFAULTS_KEY,
    HOLD_RATIO_KEY,
    INDEX_KEY,
    MODEL_PREFIX,
    VECTOR_ENVS_KEY,
    apply_values,
    config_path,
    sampled_values,
    seed_of,
    stage_of,
    trial_index,
    trial_seed,
)
from tuner.rllib._update_ratio import (
    as_trial_runs,
    derived_settings,
    holds_update_ratio,
    most_vector_envs,
    own_num_envs,
    round_robin_excess,
    update_ratio,
)
from tuner.rllib._user_code import user_code

__all__ = [
    "CHECKPOINT_META",
    "CODE_KEY",
    "CONFIRM_KEY",
    "ENV_CONFIG_PREFIX",
    "FINAL_EVAL_KEY",
    "FLAT_DEFAULTS_KEY",
    "HOLD_RATIO_KEY",
    "INDEX_KEY",
    "KINDS",
    "MODEL_PREFIX",
    "Q_ENCODER",
    "Q_ENCODERS",
    "TRAINABLES",
    "VECTOR_ENVS_KEY",
    "Evaluation",
    "NoTrackingStore",
    "alive_nodes",
    "apply_values",
    "as_trial_runs",
    "build_config",
    "check_env",
    "check_fits",
    "code_settings",
    "config_path",
    "custom_params",
    "custom_resources",
    "default_config",
    "derived_settings",
    "evaluate_checkpoint",
    "fixed_settings",
    "flat_defaults_apply",
    "holds_update_ratio",
    "is_function",
    "kind_of",
    "load_object",
    "make_env",
    "most_vector_envs",
    "own_num_envs",
    "preset_warnings",
    "register_env",
    "rerun_config",
    "rllib_keys",
    "sampled_values",
    "seed_of",
    "stage_of",
    "trainable_for",
    "trial_index",
    "trial_resources",
    "trial_seed",
    "update_ratio",
    "round_robin_excess",
    "user_code",
    "vector_defaults_apply",
]
