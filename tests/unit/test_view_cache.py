"""The polled views' cache: one render per view at a time, stale bodies served while a
refresh runs, and the API's own writes never answered from before them."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from pydantic import BaseModel

from tuner.api._cache import ViewCache


class View(BaseModel):
    n: int


class Renderer:
    """A render that counts its calls and, when `gate` is cleared, waits for it. It
    renders `version` as read on entry, or its call number when `version` is None."""

    def __init__(self) -> None:
        self.calls = 0
        self.version: int | None = None
        self.gate = threading.Event()
        self.gate.set()

    def __call__(self) -> View:
        self.calls += 1
        n = self.calls if self.version is None else self.version
        assert self.gate.wait(10)
        return View(n=n)


def body(response) -> int:
    return View.model_validate_json(response.body).n


def test_concurrent_polls_of_a_missing_view_share_one_render():
    async def main():
        cache, render = ViewCache(60), Renderer()
        render.gate.clear()
        polls = [asyncio.ensure_future(cache.get("e1/view", render)) for _ in range(20)]
        await asyncio.sleep(0.05)
        render.gate.set()
        return render.calls, [body(r) for r in await asyncio.gather(*polls)]

    calls, bodies = asyncio.run(main())
    assert calls == 1 and bodies == [1] * 20


def test_a_stale_view_is_served_at_once_while_one_refresh_runs():
    async def main():
        cache, render = ViewCache(0.05), Renderer()
        first = body(await cache.get("e1/view", render))
        await asyncio.sleep(0.08)  # older than the ttl, within the stale window
        render.gate.clear()  # the refresh blocks in its worker thread
        began = time.monotonic()
        stale = [body(await cache.get("e1/view", render)) for _ in range(5)]
        waited = time.monotonic() - began
        render.gate.set()
        for _ in range(100):  # the refresh lands
            await asyncio.sleep(0.01)
            if not cache._flights:
                break
        fresh = body(await cache.get("e1/view", render))
        return first, stale, waited, fresh, render.calls

    first, stale, waited, fresh, calls = asyncio.run(main())
    assert first == 1 and stale == [1] * 5 and waited < 1
    assert fresh == 2 and calls == 2  # five stale polls, one refresh


def test_a_view_older_than_the_stale_window_waits_for_a_fresh_render():
    async def main():
        cache, render = ViewCache(0.02), Renderer()
        await cache.get("e1/view", render)
        await asyncio.sleep(0.02 * (1 + ViewCache.STALE_FACTOR) + 0.05)
        return body(await cache.get("e1/view", render))

    assert asyncio.run(main()) == 2


def test_a_write_drops_cached_views_and_what_a_render_under_way_returns():
    async def main():
        cache, render = ViewCache(60), Renderer()
        await cache.get("e1/view", render)  # n=1 cached
        await cache.get("e2/view", render)  # n=2, another sweep
        began, kept = cache._items["e1/view"]
        cache._items["e1/view"] = (began - 120, kept)  # past its ttl, within the stale window
        render.gate.clear()
        render.version = 100  # what the store held before the write
        stale = body(await cache.get("e1/view", render))  # served; a refresh starts
        while render.calls < 3:  # the refresh has read the store
            await asyncio.sleep(0.01)
        render.version = 200  # the API writes (stop / resume / delete) ...
        cache.invalidate("e1")  # ... and drops the sweep's views
        waiting = asyncio.ensure_future(cache.get("e1/view", render))  # renders anew
        await asyncio.sleep(0.05)
        render.gate.set()
        after = body(await waiting)
        for _ in range(100):  # the pre-write refresh ends too
            await asyncio.sleep(0.01)
            if not cache._flights:
                break
        again = body(await cache.get("e1/view", render))
        other = body(await cache.get("e2/view", render))
        return stale, after, again, other, render.calls

    stale, after, again, other, calls = asyncio.run(main())
    assert stale == 1
    assert after == 200 and again == 200  # the pre-write render neither served nor kept
    assert other == 2 and calls == 4  # another sweep's view untouched


def test_a_render_error_reaches_the_polls_that_waited_and_is_not_cached():
    class Boom(Exception):
        pass

    def fail() -> View:
        raise Boom

    async def main():
        cache = ViewCache(60)
        with pytest.raises(Boom):
            await cache.get("e1/view", fail)
        return body(await cache.get("e1/view", lambda: View(n=7)))

    assert asyncio.run(main()) == 7
