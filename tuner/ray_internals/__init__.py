"""The one door to Ray's, RLlib's and Tune's private names (Ray 2.60).

Every private name of Ray that tuner uses (a module, attribute, method, keyword or
config key starting with `_`) is used in this package and nowhere else, each with the
reason we cannot do without it. `PRIVATE_NAMES` lists them, read from ray_internals.yaml
(beside this face); tests/unit/test_ray_internals.py checks each against the installed
Ray (it fails loudly if one moves or changes shape) and that every private name this
package's modules spell is listed, and tests/unit/test_layers.py checks that no module
of tuner/ or bench/ outside this package uses one.

This face only re-exports; each private module owns one part of Ray: `_ray` (ray.init),
`_algorithm` (AlgorithmConfig, Algorithm, Catalog), `_env_runner` (env runners,
sampling, an RLModule's exploration), `_rollout` (an env runner's timestep loop),
`_learner` (Learner, LearnerGroup), `_tune` (Trainable, PB2, Tuner, ResultGrid) and
`_names` (the list of names and its schema).

Ray is imported lazily: the functions here run in processes that have Ray already.
"""

from tuner.ray_internals._algorithm import (
    MODEL_CONFIG_KEY,
    RL_MODULE_SPEC_KEY,
    TRAINING_STEP_SOURCE,
    IterationEndHook,
    LocalReplayBufferHook,
    QEncoderHook,
    catalog_model_config,
    config_key,
    has_own_connectors,
    module_is_stateful,
)
from tuner.ray_internals._env_runner import (
    DQN_EXPLORATION_SOURCE,
    env_runner_pipelines,
    override_exploration,
    sample_env_runners,
    sync_local_weights,
)
from tuner.ray_internals._learner import (
    LEARNER_UPDATE_SOURCE,
    TARGET_UPDATE_SOURCE,
    TORCH_UPDATE_SOURCE,
    DeferredOffPolicyness,
    LeanMinibatchHook,
    fuse_adam,
    lean_cpu_steps,
    lean_target_updates,
    lean_torch_update,
    learner_compile_skips_modules,
    optimizer_lr_schedules,
    polyak_average,
    single_batch_update,
    torch_schedulers_own_lr,
    update_then_reduce,
    update_unreduced,
)
from tuner.ray_internals._names import (
    PRIVATE_NAMES,
    PrivateName,
    PrivateNamesFile,
    read_private_names,
)
from tuner.ray_internals._ray import no_prestarted_workers
from tuner.ray_internals._rollout import SAMPLE_SOURCE, install_lean_loop
from tuner.ray_internals._tune import (
    PB2ConfigHook,
    forget_pending_decisions,
    optuna_forget,
    optuna_told,
    pb2_bounded_keys,
    rebuild_in_place,
    result_grid_trials,
    set_restored_callbacks,
)

__all__ = [
    "optuna_forget",
    "optuna_told",
    "DQN_EXPLORATION_SOURCE",
    "LEARNER_UPDATE_SOURCE",
    "MODEL_CONFIG_KEY",
    "PRIVATE_NAMES",
    "RL_MODULE_SPEC_KEY",
    "SAMPLE_SOURCE",
    "TARGET_UPDATE_SOURCE",
    "TORCH_UPDATE_SOURCE",
    "TRAINING_STEP_SOURCE",
    "DeferredOffPolicyness",
    "IterationEndHook",
    "LeanMinibatchHook",
    "LocalReplayBufferHook",
    "PB2ConfigHook",
    "PrivateName",
    "PrivateNamesFile",
    "QEncoderHook",
    "catalog_model_config",
    "config_key",
    "env_runner_pipelines",
    "forget_pending_decisions",
    "fuse_adam",
    "has_own_connectors",
    "install_lean_loop",
    "lean_cpu_steps",
    "lean_target_updates",
    "lean_torch_update",
    "learner_compile_skips_modules",
    "module_is_stateful",
    "no_prestarted_workers",
    "optimizer_lr_schedules",
    "override_exploration",
    "pb2_bounded_keys",
    "polyak_average",
    "read_private_names",
    "rebuild_in_place",
    "result_grid_trials",
    "sample_env_runners",
    "set_restored_callbacks",
    "single_batch_update",
    "sync_local_weights",
    "torch_schedulers_own_lr",
    "update_then_reduce",
    "update_unreduced",
]
