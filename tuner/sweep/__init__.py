"""The sweep: one spec run as Ray Tune trials.

The driver (`python -m tuner.sweep <experiment-id>`, submitted by the service as a Ray
Job) and `tuner run` both call `run_sweep`: the Tuner's wiring (param space, searcher,
scheduler, stoppers, checkpoints), graceful stops and interrupts, progress, the
confirmation stage on fresh seeds, and the sweep's summary.

Nothing here imports FastAPI; the API reaches this package only through a driver process.
"""

from tuner.seed_stats import stats
from tuner.sweep._graceful import GracefulCtrlC, GracefulStop, StopRequested
from tuner.sweep._run import StorageError, SweepOptions, ensure_ray, latest_run, run_sweep
from tuner.sweep._summary import summarise, the_answer
from tuner.sweep._tuner import (
    build_tuner,
    optuna_sampler,
    param_space,
    sweep_ranking,
    trial_params,
)

__all__ = [
    "GracefulCtrlC",
    "GracefulStop",
    "StopRequested",
    "StorageError",
    "SweepOptions",
    "build_tuner",
    "optuna_sampler",
    "ensure_ray",
    "latest_run",
    "param_space",
    "run_sweep",
    "stats",
    "summarise",
    "sweep_ranking",
    "the_answer",
    "trial_params",
]
