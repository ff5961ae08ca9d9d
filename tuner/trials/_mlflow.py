"""Kept for Tune states pickled before the MLflow tracker was split: they reference
`tuner.trials._mlflow.MLflowTracker`. The code lives in `_mlflow_tracker.py` (the Tune
callback), `_mlflow_writer.py` (batched client), `_mlflow_metrics.py` (curation) and
`_mlflow_report.py` (the sweep's result); the names in `tuner/mlflow_names.py`."""

from tuner.trials._mlflow_metrics import result_metrics
from tuner.trials._mlflow_tracker import MLflowTracker, TrackingConfig

__all__ = ["MLflowTracker", "TrackingConfig", "result_metrics"]
