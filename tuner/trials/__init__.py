"""Everything that runs inside a sweep's driver: presets, envs, Tuner, callbacks.

Nothing here imports FastAPI; the API reaches this package only through a
driver process (`python -m tuner.trials <experiment-id>`).

The names below are imported on first use: a trial's process unpickles its
trainable from `tuner.trials._algorithms`, and importing this package must not
pull the driver's MLflow, Optuna and Tune callbacks into every trial (about a
second of a trial's start).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tuner.trials._algorithms import (
        TRAINABLES,
        build_config,
        fixed_settings,
        trial_index,
        trial_seed,
    )
    from tuner.trials._envs import check_env, make_env, register_env
    from tuner.trials._evaluate import Evaluation, evaluate_checkpoint
    from tuner.trials._mlflow_tracker import MLflowTracker, TrackingConfig
    from tuner.trials._plan import plan_spec
    from tuner.trials._resources import check_fits, trial_resources
    from tuner.trials._run import StorageError, ensure_ray, latest_run, run_sweep, summarise
    from tuner.trials._tuner import build_tuner, param_space, sampled_values
    from tuner.trials._validate import search_space, validate_spec
    from tuner.views import BestTrial, MlflowLinks, SweepSummary, TrialView

_OWNERS = {
    "tuner.trials._algorithms": (
        "TRAINABLES",
        "build_config",
        "fixed_settings",
        "trial_index",
        "trial_seed",
    ),
    "tuner.trials._envs": ("check_env", "make_env", "register_env"),
    "tuner.trials._evaluate": ("Evaluation", "evaluate_checkpoint"),
    "tuner.trials._mlflow_tracker": ("MLflowTracker", "TrackingConfig"),
    "tuner.trials._plan": ("plan_spec",),
    "tuner.trials._resources": ("check_fits", "trial_resources"),
    "tuner.trials._run": ("StorageError", "ensure_ray", "latest_run", "run_sweep", "summarise"),
    "tuner.trials._tuner": ("build_tuner", "param_space", "sampled_values"),
    "tuner.trials._validate": ("search_space", "validate_spec"),
    "tuner.views": ("BestTrial", "MlflowLinks", "SweepSummary", "TrialView"),
}
_MODULE_OF = {name: module for module, names in _OWNERS.items() for name in names}

# what a sweep's driver needs before its first trial: RLlib and torch, Tune, MLflow
DRIVER_MODULES = ("tuner.trials._run", "tuner.trials._evaluate")


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'tuner.trials' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def import_driver() -> None:
    """Imports what a sweep's driver runs (seconds: RLlib, torch, MLflow), e.g. on a
    thread beside the Ray start."""
    for module in DRIVER_MODULES:
        importlib.import_module(module)


__all__ = [
    "TRAINABLES",
    "BestTrial",
    "Evaluation",
    "evaluate_checkpoint",
    "MLflowTracker",
    "MlflowLinks",
    "TrackingConfig",
    "SweepSummary",
    "TrialView",
    "build_config",
    "build_tuner",
    "check_env",
    "check_fits",
    "ensure_ray",
    "fixed_settings",
    "import_driver",
    "latest_run",
    "StorageError",
    "make_env",
    "param_space",
    "plan_spec",
    "register_env",
    "run_sweep",
    "sampled_values",
    "search_space",
    "summarise",
    "trial_index",
    "trial_seed",
    "trial_resources",
    "validate_spec",
]
