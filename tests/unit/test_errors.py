"""One error base: every exception tuner defines is a TunerError (tuner/errors.py)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import tuner
from tuner import TunerError


def tuner_modules() -> list[str]:
    """Every module under tuner/, imported (the store's migrations excepted: alembic runs
    them, and env.py needs alembic's context to import)."""
    names = []
    for info in pkgutil.walk_packages(tuner.__path__, "tuner."):
        if ".migrations" in info.name:
            continue
        importlib.import_module(info.name)
        names.append(info.name)
    return names


def test_every_exception_of_tuner_is_a_tuner_error():
    offenders, seen = [], []
    for name in tuner_modules():
        for obj in vars(importlib.import_module(name)).values():
            if not (inspect.isclass(obj) and issubclass(obj, BaseException)):
                continue
            if obj.__module__ != name:  # imported, not defined here
                continue
            seen.append(obj)
            if not issubclass(obj, TunerError):
                offenders.append(f"{name}.{obj.__qualname__} ({obj.__bases__})")
    assert len(seen) >= 10  # the walk found them
    assert offenders == [], "not TunerErrors: " + ", ".join(offenders)


def test_each_error_still_is_what_its_callers_catch():
    """The built-in bases stay: `except ValueError` (and pydantic, which turns only a
    ValueError raised in a validator into a validation error) still catches them."""
    from tuner.compare import UnknownSweep
    from tuner.launcher import JobNotFound, JobsError
    from tuner.launcher._address import ClusterUnreachable
    from tuner.rllib import NoTrackingStore
    from tuner.spec import NestingTooDeep, SpecError
    from tuner.sweep import StorageError

    assert issubclass(SpecError, ValueError) and issubclass(NestingTooDeep, SpecError)
    assert issubclass(JobNotFound, JobsError) and issubclass(JobsError, RuntimeError)
    assert issubclass(ClusterUnreachable, ConnectionError)
    assert issubclass(NoTrackingStore, FileNotFoundError)
    assert issubclass(UnknownSweep, LookupError)
    assert issubclass(StorageError, RuntimeError)
    error = NoTrackingStore("no MLflow tracking store at /x")
    assert str(error) == "no MLflow tracking store at /x"


def test_a_spec_error_in_a_pydantic_validator_is_a_validation_error():
    from pydantic import BaseModel, ValidationError, field_validator

    from tuner.spec import SpecError

    class Model(BaseModel):
        x: int

        @field_validator("x")
        @classmethod
        def positive(cls, value: int) -> int:
            if value <= 0:
                raise SpecError.one("x", "must be positive", value)
            return value

    with pytest.raises(ValidationError, match="must be positive"):
        Model(x=0)
