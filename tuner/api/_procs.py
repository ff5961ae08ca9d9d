"""Worker processes of the API: spawned (so MLflow, pyarrow and RLlib load there, never
in the API process), each able to be killed outright when it hangs."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from typing import Any


def _note_pid(slot: Any) -> None:
    """A worker's initializer: leaves its pid where the API can find it to kill it."""
    slot.value = os.getpid()


class OneWorker:
    """A pool of one spawned worker process that can be killed (ProcessPoolExecutor's
    shutdown waits for a running task; a worker that hangs must die instead)."""

    def __init__(self) -> None:
        context = multiprocessing.get_context("spawn")
        self._pid = context.Value("i", 0)  # set by the worker as it starts (_note_pid)
        self.pool = ProcessPoolExecutor(
            max_workers=1, mp_context=context, initializer=_note_pid, initargs=(self._pid,)
        )

    def kill(self) -> None:
        """Kills the worker and shuts the pool down; queued work is cancelled."""
        pid = self._pid.value
        if pid:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass  # it ended by itself
        self.pool.shutdown(wait=False, cancel_futures=True)


async def in_fresh_process(fn: Callable[..., Any], *args: Any, timeout_s: float) -> Any:
    """`fn(*args)` in a spawned process of its own (MLflow / pyarrow loaded there, never
    in the API process); raises TimeoutError (and kills it) past `timeout_s`."""
    worker = OneWorker()
    try:
        return await asyncio.wait_for(asyncio.wrap_future(worker.pool.submit(fn, *args)), timeout_s)
    except TimeoutError:
        raise TimeoutError(f"{fn.__name__} did not finish in {timeout_s:g} s") from None
    finally:
        worker.kill()
