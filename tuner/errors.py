"""The base of every exception tuner raises.

`except TunerError` catches whatever tuner itself refuses or fails at, and nothing a
library under it raised. Each exception of ours also keeps the built-in base its
callers catch it by (`SpecError` is a ValueError, which pydantic turns into a
validation error; `JobsError` a RuntimeError; `ClusterUnreachable` a ConnectionError),
so `except ValueError` and the like catch what they always did.
"""

from __future__ import annotations


class TunerError(Exception):
    """An error of tuner's own.

    A refused spec, a sweep that cannot be found, a job server that cannot be asked; the
    message says what and where.
    """


__all__ = ["TunerError"]
