"""How the `tuner` command shows what tuner's modules log: the library logs to module
loggers (`logging.getLogger(__name__)`), the command decides the look.

On stderr, a record at WARNING or above reads `warning: <message>` (`error: ...`), any
other its bare message ("resuming <run>"), as the command printed them before it had
loggers. Records stop at the `tuner` logger: a handler some library puts on the root
logger never prints them a second time.
"""

from __future__ import annotations

import logging
import sys

LOGGER = "tuner"


class _Look(logging.Formatter):
    """`warning: <message>` for a warning or worse, the bare message for a notice; a
    traceback, where the record has one, on the lines below."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        if record.levelno >= logging.WARNING:
            return f"{record.levelname.lower()}: {record.message}"
        return record.message


class _Stderr(logging.Handler):
    """Writes to the sys.stderr of the moment it emits: the one a rich live display or a
    test's capture put there, as print did."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = self.format(record)
            sys.stderr.write(text + "\n")
            sys.stderr.flush()
        except Exception:  # noqa: BLE001 - logging's rule: a record never raises
            self.handleError(record)


def show_logs(level: int = logging.INFO) -> None:
    """Shows tuner's records at `level` and above on stderr, in the command's look; once,
    however often it is called."""
    logger = logging.getLogger(LOGGER)
    for handler in [h for h in logger.handlers if isinstance(h, _Stderr)]:
        logger.removeHandler(handler)
    handler = _Stderr()
    handler.setFormatter(_Look())
    logger.addHandler(handler)
    logger.setLevel(level)
    logger.propagate = False


__all__ = ["show_logs"]
