"""The `tuner` command.

Local commands (_local.py), the service's client (_remote.py), how tuner's log records
look (_logs.py), and how the process ends.
"""

from __future__ import annotations

import atexit
import os
import sys

from tuner.cli import _local, _remote  # noqa: F401 - registers their commands
from tuner.cli._app import _Ending, app, err
from tuner.cli._logs import show_logs


def _end_without_teardown() -> None:
    """Ends a `tuner run` process without the interpreter's module teardown.

    Once every exit hook registered during the run has run (Ray's shutdown, MLflow's,
    Tune's loggers': they run before this one, which `main` registered first). The
    teardown takes seconds, after torch and RLlib, and changes nothing on disk.
    """
    if _Ending.code is None or not _Ending.after_ray:
        return
    import logging

    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():  # its own hook, if it came before ours
        ray.shutdown()
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(_Ending.code)


def main() -> None:
    """Entry point of the `tuner` console script."""
    _Ending.code, _Ending.after_ray = None, False
    atexit.register(_end_without_teardown)
    show_logs()
    try:
        _main()
    except SystemExit as done:
        code = done.code
        _Ending.code = code if isinstance(code, int) else (0 if code is None else 1)
        raise
    except KeyboardInterrupt:
        _Ending.code = 130
        raise
    except BaseException:
        _Ending.code = 1
        raise


def _main() -> None:
    from pydantic import ValidationError

    try:
        app()
    except ValidationError as e:  # a TUNER_* setting with a bad value
        if e.title != "Settings":
            raise
        for issue in e.errors():
            name = "TUNER_" + "_".join(str(p) for p in issue["loc"]).upper()
            msg = issue["msg"].removeprefix("Value error, ")
            err.print(f"{name}: {msg} (got {issue.get('input')!r})", highlight=False)
        raise SystemExit(2) from None


__all__ = ["app", "main"]
