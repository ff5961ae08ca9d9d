"""What a trial's process imports: the trainable's module, not the driver's MLflow."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import tuner.trials

DRIVER_ONLY = ("mlflow", "optuna", "fastapi", "sqlalchemy", "tuner.trials._run")


def test_a_trial_process_does_not_import_the_drivers_modules():
    # a trial's actor unpickles its trainable from tuner.trials._algorithms
    code = (
        "import sys, json; import tuner.trials._algorithms; "
        f"print(json.dumps([m for m in {DRIVER_ONLY!r} if m in sys.modules]))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout) == []


@pytest.mark.parametrize("name", tuner.trials.__all__)
def test_every_public_name_of_the_package_resolves(name):
    assert getattr(tuner.trials, name) is not None


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        tuner.trials.nope  # noqa: B018
