"""Work that needs MLflow or pyarrow, run in a process of its own."""

from __future__ import annotations

import asyncio
import multiprocessing
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from typing import Any


async def in_fresh_process(fn: Callable[..., Any], *args: Any, timeout_s: float) -> Any:
    """`fn(*args)` in a spawned process of its own (MLflow / pyarrow loaded there, never
    in the API process); raises TimeoutError (and kills it) past `timeout_s`."""
    pool = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"))
    try:
        return await asyncio.wait_for(asyncio.wrap_future(pool.submit(fn, *args)), timeout_s)
    except TimeoutError:
        raise TimeoutError(f"{fn.__name__} did not finish in {timeout_s:g} s") from None
    finally:
        for process in list(getattr(pool, "_processes", {}).values()):
            process.kill()
        pool.shutdown(wait=False, cancel_futures=True)
