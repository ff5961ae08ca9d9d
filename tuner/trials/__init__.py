"""Everything that runs inside a sweep's driver: presets, envs, Tuner, callbacks.

Nothing here imports FastAPI; the API reaches this package only through a
driver process (`python -m tuner.trials <experiment-id>`).
"""

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
    "trial_resources",
    "trial_seed",
    "validate_spec",
]
