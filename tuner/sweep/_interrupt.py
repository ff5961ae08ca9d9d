"""Knows whether a Tune run ended by an interrupt (Ctrl-C, or the service's stop).

After an interrupt Tune stops every live trial and reports it TERMINATED, like one
that finished; a sweep ended by its own rules (target reached, time budget) looks the
same. Only the signal tells them apart, so this callback wraps Tune's handlers.
"""

from __future__ import annotations

import logging
import signal
import threading
from typing import Any

from ray import tune as _tune_package
from ray.tune import Callback


class _NoRestoreHint(logging.Filter):
    """Drops Tune's "Resume experiment with: Tuner.restore(...)" after an interrupt: a
    sweep of ours continues with `tuner run --resume` or `tuner resume`, which we print."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Resume experiment with:" not in record.getMessage()


# tune.tune's module logger, named by its module (the package re-exports the function)
logging.getLogger(_tune_package.run.__module__).addFilter(_NoRestoreHint())

_SIGNALS = tuple(s for s in (signal.SIGINT, getattr(signal, "SIGUSR1", None)) if s is not None)


class InterruptWatch(Callback):
    """`interrupted` turns True when Tune's SIGINT / SIGUSR1 handler runs."""

    def __init__(self) -> None:
        self.interrupted = False

    def __getstate__(self) -> dict[str, Any]:
        return {"interrupted": False}

    def setup(self, **info: Any) -> None:
        """Called by Tune after it installed its own handlers: wrap them."""
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in _SIGNALS:
            tune_handler = signal.getsignal(sig)
            if callable(tune_handler):
                signal.signal(sig, self._wrap(tune_handler))

    def _wrap(self, handler: Any) -> Any:
        def on_signal(signum: int, frame: Any) -> None:
            self.interrupted = True
            handler(signum, frame)

        return on_signal
