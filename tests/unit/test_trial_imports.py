"""What a trial's process imports (its trainable's package, not the driver's MLflow), and
that every package's public face resolves each name it lists."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest

DRIVER_ONLY = ("mlflow", "optuna", "fastapi", "sqlalchemy", "tuner.sweep", "tuner.tracking")
PACKAGES = ("tuner.spec", "tuner.rllib", "tuner.tracking", "tuner.sweep", "tuner.validation")


def test_a_trial_process_does_not_import_the_drivers_modules():
    # a trial's actor unpickles its trainable from tuner.rllib
    code = (
        "import sys, json; import tuner.rllib; "
        f"print(json.dumps([m for m in {DRIVER_ONLY!r} if m in sys.modules]))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout) == []


def test_the_api_process_imports_no_ray():
    """The API's validator submits the pipeline to a worker: importing the API and the
    pipeline's face loads neither Ray nor RLlib."""
    code = (
        "import sys, json; import tuner.api, tuner.validation; "
        "print(json.dumps([m for m in ('ray', 'torch') if m in sys.modules]))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout) == []


@pytest.mark.parametrize(
    ("package", "name"),
    [(p, n) for p in PACKAGES for n in importlib.import_module(p).__all__],
)
def test_every_public_name_of_a_package_resolves(package, name):
    assert getattr(importlib.import_module(package), name) is not None


def test_an_unknown_name_is_an_attribute_error():
    import tuner.validation

    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        tuner.validation.nope  # noqa: B018
