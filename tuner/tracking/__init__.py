"""Where a sweep's results go as it runs: MLflow and the store.

MLflow (a parent run per sweep, a nested child run per trial, curated params and
metrics, checkpoints as artifacts, the sweep's result and its registered model), written
in batches off Tune's loop; and the store (trial rows and per-iteration metric points,
the read model the API and the page show).

Both are Tune callbacks in the driver; they read what tuner.rllib derived for a trial.
"""

from tuner.tracking._mlflow_metrics import result_metrics
from tuner.tracking._mlflow_report import model_description
from tuner.tracking._mlflow_tracker import MLflowTracker, TrackingConfig
from tuner.tracking._mlflow_writer import open_in_background, open_store
from tuner.tracking._store_callback import Ranking, StoreRecorder, curve_numbers
from tuner.tracking._warm import EarlierSweep, WarmStart, find_earlier_sweep, warm_start

__all__ = [
    "EarlierSweep",
    "MLflowTracker",
    "Ranking",
    "StoreRecorder",
    "TrackingConfig",
    "WarmStart",
    "curve_numbers",
    "find_earlier_sweep",
    "model_description",
    "open_in_background",
    "open_store",
    "result_metrics",
    "warm_start",
]
