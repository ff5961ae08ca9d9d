"""Stopping a sweep without losing training: checkpoint first, then interrupt.

Tune's own interrupt (Ctrl-C, SIGUSR1) saves the experiment state and leaves
unfinished trials resumable, but each resumes from its last *periodic* checkpoint
(none with `checkpoint.frequency: 0`). These callbacks first make every running trial
that has trained save a checkpoint at its next result (Tune's `should_checkpoint`),
then send the driver SIGUSR1. What asks for the stop differs: the service's store
(GracefulStop) or Ctrl-C in a terminal (GracefulCtrlC).
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ray.tune import Callback
from ray.tune.result import SHOULD_CHECKPOINT
from ray.tune.stopper import Stopper

from tuner.mlflow_names import ITERATION_KEY
from tuner.statuses import TrialStatus

# Sweeps whose GracefulStop decided to end the run now (read by StopRequested.stop_all).
_INTERRUPTED: set[str] = set()
logger = logging.getLogger(__name__)


class CheckpointThenInterrupt(Callback):
    """Once `requested()` is true: each running trial that has trained checkpoints at
    its next result; when all have (or `grace_s` passed, or they ended), the driver
    sends itself SIGUSR1, which Tune handles like Ctrl-C."""

    def __init__(self, grace_s: float) -> None:
        self.grace_s = grace_s
        self._reset()

    def _reset(self) -> None:
        self.draining = False
        self.interrupted = False
        self.pending: set[str] = set()
        self.deadline = 0.0

    def __getstate__(self) -> dict[str, Any]:  # Tune pickles callbacks: only plain data
        state = self.__dict__.copy()
        state.update(draining=False, interrupted=False, pending=set())
        return state

    def requested(self) -> bool:
        """Whether a stop was asked for (polled at every step of Tune's loop)."""
        raise NotImplementedError

    def on_step_begin(self, iteration: int, trials: list, **info: Any) -> None:
        if self.interrupted:
            return
        if not self.draining:
            if not self.requested():
                return
            self.draining = True
            self.deadline = time.monotonic() + self.grace_s
            self.pending = {
                t.trial_id
                for t in trials
                if t.status == TrialStatus.RUNNING and (t.last_result or {}).get(ITERATION_KEY)
            }
        if not self.pending or time.monotonic() > self.deadline:
            self.interrupt()

    def on_trial_result(
        self, iteration: int, trials: list, trial: Any, result: dict, **info: Any
    ) -> None:
        if self.draining and not self.interrupted and trial.trial_id in self.pending:
            result[SHOULD_CHECKPOINT] = True  # Tune saves right after this result

    def on_checkpoint(
        self, iteration: int, trials: list, trial: Any, checkpoint: Any, **info: Any
    ) -> None:
        self.pending.discard(trial.trial_id)

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self.pending.discard(trial.trial_id)

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self.pending.discard(trial.trial_id)

    def interrupt(self) -> None:
        """Ends the run now through Tune's SIGUSR1 handler."""
        self.interrupted = True
        if callable(signal.getsignal(signal.SIGUSR1)):  # Tune's own (never the default)
            os.kill(os.getpid(), signal.SIGUSR1)


class GracefulStop(CheckpointThenInterrupt):
    """The service's stop: asked for by `stop_requested` in the store (the API sets it).

    Args:
        store_url: The store's URL.
        experiment_id: The sweep's id.
        grace_s: How long running trials have to save a checkpoint before the run ends.
        poll_s: How often the store is asked.
    """

    def __init__(
        self, store_url: str, experiment_id: str, grace_s: float = 30.0, poll_s: float = 1.0
    ) -> None:
        super().__init__(grace_s)
        self.store_url = store_url
        self.experiment_id = experiment_id
        self.poll_s = poll_s
        self._checked_at = 0.0
        self._store: Any = None

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state["_store"] = None
        return state

    def setup(self, **info: Any) -> None:
        """A fresh run (or resume) of this sweep in this process starts uninterrupted."""
        _INTERRUPTED.discard(self.experiment_id)

    def requested(self) -> bool:
        """Whether the API asked the sweep to stop (the store, polled every `poll_s`).

        Returns:
            True once asked, or where the sweep's record is gone.
        """
        now = time.monotonic()
        if now - self._checked_at < self.poll_s:
            return False
        self._checked_at = now
        if self._store is None:
            from tuner.store import Store

            self._store = Store(self.store_url)
        rec = self._store.get_experiment(self.experiment_id)
        return rec is None or rec.stop_requested

    def interrupt(self) -> None:
        """Ends the run now (Tune's SIGUSR1 handler, else StopRequested.stop_all)."""
        _INTERRUPTED.add(self.experiment_id)
        super().interrupt()


class GracefulCtrlC(CheckpointThenInterrupt):
    """`tuner run`'s Ctrl-C: the first one checkpoints running trials, then stops.

    A second one stops at once (Tune's own handler, as without this callback).

    Args:
        grace_s: How long running trials have to save a checkpoint before the run ends.
    """

    def __init__(self, grace_s: float = 120.0) -> None:
        super().__init__(grace_s)
        self._pressed = False

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state["_pressed"] = False
        return state

    def setup(self, **info: Any) -> None:
        """Called after Tune installed its SIGINT handler: put this one in front."""
        if threading.current_thread() is not threading.main_thread():
            return
        tune_handler = signal.getsignal(signal.SIGINT)
        if not callable(tune_handler):
            return

        def on_sigint(signum: int, frame: Any) -> None:
            if self._pressed:
                tune_handler(signum, frame)  # the second Ctrl-C: now
                return
            self._pressed = True
            # a notice, not a warning: the CLI shows it as it is, on a line of its own
            # after the terminal's ^C
            logger.info(
                "\nCtrl-C: running trials save a checkpoint, then the sweep stops "
                "(`--resume` continues it). Ctrl-C again to stop at once."
            )

        signal.signal(signal.SIGINT, on_sigint)

    def requested(self) -> bool:
        """Whether Ctrl-C was pressed.

        Returns:
            True once pressed.
        """
        return self._pressed


class StopRequested(Stopper):
    """Ends the run once GracefulStop decided to, where Tune's SIGUSR1 handler is not installed.

    Not installed: not the main thread; `stop_all` then returns True.

    Args:
        store_url: The store's URL (kept for Tune states pickled by earlier versions).
        experiment_id: The sweep's id.
    """

    def __init__(self, store_url: str, experiment_id: str) -> None:
        self.store_url = store_url  # kept for Tune states pickled by earlier versions
        self.experiment_id = experiment_id

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        return False  # a stopped trial would be TERMINATED, and never resumed

    def stop_all(self) -> bool:
        return self.experiment_id in _INTERRUPTED and not callable(signal.getsignal(signal.SIGUSR1))


@contextmanager
def signal_handlers_restored() -> Iterator[None]:
    """Puts SIGINT / SIGUSR1 back as they were before Tune (and our callbacks) replaced
    them, so a Ctrl-C after the fit behaves as the caller expects."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGUSR1)}
    try:
        yield
    finally:
        for sig, handler in saved.items():
            if handler is not None:
                signal.signal(sig, handler)
