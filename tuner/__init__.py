"""tuner: hyperparameter tuning for reinforcement learning (Ray Tune over RLlib, MLflow)."""

__version__ = "0.1.0"
