"""tuner: hyperparameter tuning for reinforcement learning (Ray Tune over RLlib, MLflow)."""

from tuner.errors import TunerError

__version__ = "0.1.0"

__all__ = ["TunerError", "__version__"]
