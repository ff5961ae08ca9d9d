"""Example user code for the specs in experiments/: envs, callbacks, models, training
loops and multi-agent envs a spec names by import path ("tuner_examples.<module>:<Name>").

It is installed with the project (pyproject.toml), so every Ray worker can import it, and a
spec may name it only where the operator allows the module: `tuner run --allow-module
tuner_examples ...`, or TUNER_ALLOWED_MODULES=tuner_examples for the service.
"""
