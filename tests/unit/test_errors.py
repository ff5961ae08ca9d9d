"""One error base, and module loggers whose records the faces show: every exception
tuner defines is a TunerError (tuner/errors.py); the `tuner` command shows a logged
warning as it printed it before (`warning: ...`, tuner/cli/_logs.py), and the sweep's
driver as a line of its job's log."""

from __future__ import annotations

import importlib
import inspect
import logging
import pkgutil
import threading
from collections.abc import Iterator

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

    assert issubclass(SpecError, ValueError)
    assert issubclass(NestingTooDeep, SpecError)
    assert issubclass(JobNotFound, JobsError)
    assert issubclass(JobsError, RuntimeError)
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


# --- how the faces show a module logger's records ------------------------------------


@pytest.fixture
def tuner_logger() -> Iterator[logging.Logger]:
    """The `tuner` logger, as it was again after the test."""
    logger = logging.getLogger("tuner")
    kept = (list(logger.handlers), logger.level, logger.propagate)
    yield logger
    logger.handlers[:] = kept[0]
    logger.setLevel(kept[1])
    logger.propagate = kept[2]


def test_the_cli_shows_a_logged_warning_as_it_printed_it(tuner_logger, capsys, monkeypatch):
    import tuner.sweep._summary as summary_module
    from tuner.cli._logs import show_logs

    show_logs()
    show_logs()  # once, however often

    def fails(*args: object, **kwargs: object) -> None:
        raise RuntimeError("no trials")

    monkeypatch.setattr(summary_module, "sweep_importance", fails)
    assert summary_module._importance([], {}, "max") == {}
    # the warm start's warnings were printed as `warning: <line>`; now every warning is
    logging.getLogger("tuner.sweep._run").warning("no earlier sweep of this name")
    logging.getLogger("tuner.sweep._run").info("resuming /runs/cartpole")  # a notice: bare
    logging.getLogger("tuner.sweep._run").debug("not shown")
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        "warning: hyperparameter importance not computed: RuntimeError('no trials')\n"
        "warning: no earlier sweep of this name\n"
        "resuming /runs/cartpole\n"
    )


def test_the_cli_shows_the_head_watchs_warning_once(tuner_logger, capsys):
    """The driver's last words when its head is gone (tests/integration/test_head_watch.py
    reads them in a real driver's stderr), once, even with a root handler."""
    from tuner.cli._logs import show_logs
    from tuner.sweep._headwatch import watch_head

    show_logs()
    root = logging.StreamHandler()  # a library's root handler (on capsys's stderr)
    logging.getLogger().addHandler(root)
    gone = threading.Event()
    dead = "127.0.0.1:1"  # nothing listens on port 1
    try:
        watch_head(dead, interval_s=0.01, misses=1, on_gone=gone.set)
        assert gone.wait(10)
    finally:
        logging.getLogger().removeHandler(root)
    err = capsys.readouterr().err
    said = f"the Ray head at {dead} is gone: the driver exits; the sweep's state is saved"
    assert err.count(said) == 1, err
    assert f"warning: {said}, a resume continues it\n" in err


def test_the_command_installs_the_look(tuner_logger, capsys, monkeypatch):
    import tuner.cli

    monkeypatch.setattr(tuner.cli, "_main", lambda: logging.getLogger("tuner.x").warning("w"))
    tuner.cli.main()
    assert capsys.readouterr().err == "warning: w\n"


def test_the_driver_logs_to_its_jobs_log(tuner_logger, capsys):
    """`python -m tuner.sweep`: its stderr is the job's log; a warning is a log line there,
    once, with its level and module."""
    from tuner.sweep.__main__ import log_to_stderr

    log_to_stderr()
    log_to_stderr()
    logging.getLogger("tuner.tracking._store_callback").warning("best trial so far not written")
    logging.getLogger("tuner.sweep._run").info("resuming /runs/cartpole")
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2, lines
    assert lines[0].endswith(
        "\tWARNING tuner.tracking._store_callback -- best trial so far not written"
    )
    assert lines[1].endswith("\tINFO tuner.sweep._run -- resuming /runs/cartpole")
