"""The polled views' cache: one render per view at a time, stale bodies served while a
refresh runs, and the API's own writes never answered from before them."""

from __future__ import annotations

import asyncio
import json
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


class Clock:
    """The cache's clock, moved by hand: no test hangs on the machine's speed."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def body(response) -> int:
    return View.model_validate_json(response.body).n


async def until(check, timeout: float = 10.0) -> None:
    """Yields to the loop until `check()` holds: a render started in its worker thread
    (a fixed sleep is not enough on a loaded machine)."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.005)


def test_concurrent_polls_of_a_missing_view_share_one_render():
    async def main():
        cache, render = ViewCache(60), Renderer()
        render.gate.clear()
        polls = [asyncio.ensure_future(cache.get("e1/view", render)) for _ in range(20)]
        await until(lambda: render.calls >= 1)  # the render waits on the gate ...
        await asyncio.sleep(0.05)  # ... while every poll has joined it
        render.gate.set()
        bodies = [body(r) for r in await asyncio.gather(*polls)]
        return render.calls, bodies

    calls, bodies = asyncio.run(main())
    assert calls == 1
    assert bodies == [1] * 20


def test_a_stale_view_is_refreshed_by_one_poll_while_the_others_get_it_at_once():
    async def main():
        clock = Clock()
        cache, render = ViewCache(1, clock), Renderer()
        first = body(await cache.get("e1/view", render))
        clock.now += 2  # older than the ttl, within the stale window
        render.gate.clear()  # the refresh blocks in its worker thread
        refreshing = asyncio.ensure_future(cache.get("e1/view", render))
        await until(lambda: render.calls == 2)
        began = time.monotonic()
        stale = [body(await cache.get("e1/view", render)) for _ in range(5)]
        waited = time.monotonic() - began
        render.gate.set()
        return first, stale, waited, body(await refreshing), render.calls

    first, stale, waited, refreshed, calls = asyncio.run(main())
    assert first == 1
    assert stale == [1] * 5
    assert waited < 1  # the others did not wait
    assert refreshed == 2
    assert calls == 2  # the refreshing poll got the new view; one render


def test_a_poll_on_its_own_never_gets_a_view_older_than_the_ttl():
    async def main():
        clock = Clock()
        cache, render = ViewCache(1, clock), Renderer()
        seen = []
        for _ in range(3):
            seen.append(body(await cache.get("e1/view", render)))
            seen.append(body(await cache.get("e1/view", render)))  # within the ttl: kept
            clock.now += 1.5
        return seen

    assert asyncio.run(main()) == [1, 1, 2, 2, 3, 3]


def test_a_body_older_than_the_stale_window_is_not_served_while_a_refresh_runs():
    async def main():
        clock = Clock()
        cache, render = ViewCache(1, clock), Renderer()
        await cache.get("e1/view", render)
        clock.now += 1 + ViewCache.STALE_FACTOR + 0.5
        render.gate.clear()
        refreshing = asyncio.ensure_future(cache.get("e1/view", render))
        await until(lambda: render.calls == 2)
        other = asyncio.ensure_future(cache.get("e1/view", render))  # must wait too
        await asyncio.sleep(0.05)
        waited = not other.done()
        render.gate.set()
        return waited, body(await refreshing), body(await other), render.calls

    assert asyncio.run(main()) == (True, 2, 2, 2)


def test_a_write_drops_cached_views_and_what_a_render_under_way_returns():
    async def main():
        clock = Clock()
        cache, render = ViewCache(60, clock), Renderer()
        await cache.get("e1/view", render)  # n=1 cached
        clock.now += 50
        await cache.get("e2/view", render)  # n=2, another sweep
        clock.now += 20  # e1 past its ttl (70 s), within the stale window; e2 fresh
        render.gate.clear()
        render.version = 100  # what the store held before the write
        refreshing = asyncio.ensure_future(cache.get("e1/view", render))  # waits on it
        while render.calls < 3:  # the refresh has read the store
            await asyncio.sleep(0.01)
        stale = body(await cache.get("e1/view", render))  # meanwhile: the body kept
        render.version = 200  # the API writes (stop / resume / delete) ...
        cache.invalidate("e1")  # ... and drops the sweep's views
        waiting = asyncio.ensure_future(cache.get("e1/view", render))  # renders anew
        await asyncio.sleep(0.05)
        render.gate.set()
        after = body(await waiting)
        before_write = body(await refreshing)  # the poll that began before the write
        for _ in range(100):  # the pre-write refresh ends too
            await asyncio.sleep(0.01)
            if not cache._flights:
                break
        again = body(await cache.get("e1/view", render))
        other = body(await cache.get("e2/view", render))
        return stale, before_write, after, again, other, render.calls

    stale, before_write, after, again, other, calls = asyncio.run(main())
    assert stale == 1
    assert before_write == 100
    assert after == 200
    assert again == 200  # the pre-write render neither served nor kept
    assert other == 2
    assert calls == 4  # another sweep's view untouched


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


def test_a_render_left_in_another_event_loop_is_not_awaited_here():
    """TestClient runs each request in an event loop of its own: a refresh begun in one
    that ended must not be awaited from the next."""
    clock = Clock()
    cache, render = ViewCache(1, clock), Renderer()

    async def poll():
        return body(await cache.get("e1/view", render))

    assert asyncio.run(poll()) == 1
    clock.now += 2

    async def start_refresh_and_leave():
        render.gate.clear()
        stale = body(await cache.get("e1/view", render))  # the refresh: waits ...
        return stale

    async def leave_after_starting():
        task = asyncio.ensure_future(start_refresh_and_leave())
        await asyncio.sleep(0.05)  # ... in this loop, which ends with it pending
        task.cancel()

    asyncio.run(leave_after_starting())
    render.gate.set()
    assert asyncio.run(poll()) in (2, 3)  # rendered again here, no error


async def settle(cache: ViewCache) -> None:
    """Until the renders under way have ended."""
    for _ in range(200):
        if not cache._flights:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("a render never ended")


def test_a_polled_view_is_refreshed_in_the_background_and_the_poll_does_not_wait():
    async def main():
        clock = Clock()
        cache, render = ViewCache(1, clock), Renderer()
        first = body(await cache.get("e1/view", render))
        clock.now += 0.4
        cache.refresh_due()  # younger than half the ttl: nothing to do
        calls_young = render.calls
        clock.now += 0.2
        cache.refresh_due()  # half the ttl old: rendered again, no poll asking
        await settle(cache)
        calls_refreshed = render.calls
        clock.now += 0.7  # 1.3 s after the first render, 0.7 s after the refresh
        render.gate.clear()  # a render now would block: the poll must not need one
        began = time.monotonic()
        polled = body(await cache.get("e1/view", render))
        waited = time.monotonic() - began
        render.gate.set()
        return first, calls_young, calls_refreshed, polled, waited, render.calls

    first, calls_young, calls_refreshed, polled, waited, calls = asyncio.run(main())
    assert (first, calls_young, calls_refreshed) == (1, 1, 2)
    assert polled == 2
    assert calls == 2
    assert waited < 0.5  # served the refreshed body at once


def test_a_view_not_polled_lately_is_not_refreshed():
    async def main():
        clock = Clock()
        cache, render = ViewCache(1, clock), Renderer()
        await cache.get("e1/view", render)
        clock.now += ViewCache.HOT_S + 0.1
        cache.refresh_due()
        await settle(cache)
        clock.now += 1
        cache.refresh_due()
        await settle(cache)
        return render.calls, cache._hot

    calls, hot = asyncio.run(main())
    assert calls == 1
    assert hot == {}


def test_a_failed_refresh_stops_refreshing_until_the_next_poll_which_gets_the_error():
    class Gone(Exception):
        pass

    state = {"gone": False}

    def render() -> View:
        if state["gone"]:
            raise Gone
        return View(n=1)

    async def main():
        clock = Clock()
        cache = ViewCache(1, clock)
        await cache.get("e1/view", render)
        state["gone"] = True  # the sweep deleted by another process
        clock.now += 0.6
        cache.refresh_due()
        await settle(cache)
        hot_after_error = dict(cache._hot)
        clock.now += 1  # the body kept is past its ttl: the next poll renders, and fails
        with pytest.raises(Gone):
            await cache.get("e1/view", render)
        return hot_after_error

    assert asyncio.run(main()) == {}


def test_the_refresher_runs_until_cancelled_and_not_at_all_without_a_cache():
    async def main():
        cache, render = ViewCache(0.08), Renderer()
        await cache.get("e1/view", render)
        task = asyncio.ensure_future(cache.refresh_forever())
        await asyncio.sleep(0.5)  # about six refreshes at 0.04 s old each
        task.cancel()
        await settle(cache)  # a render the refresher began before it was cancelled
        refreshed = render.calls
        await asyncio.sleep(0.2)
        # ttl 0 keeps nothing: the refresher returns at once
        await asyncio.wait_for(ViewCache(0).refresh_forever(), timeout=1)
        return refreshed, render.calls

    refreshed, after_cancel = asyncio.run(main())
    assert refreshed >= 3
    assert after_cancel == refreshed


def test_a_cached_poll_takes_no_thread_hop(service_app, monkeypatch):
    """The routes' dependencies do not block, so they run on the event loop: a poll
    answered from the cache wakes no worker thread (each hop cost ~0.5 ms of CPU and
    a wait for a thread under 50 pollers)."""
    import fastapi.dependencies.utils as dependency_utils
    from fastapi.testclient import TestClient

    app = service_app(api_token="t")
    exp = app.state.store.create_experiment(name="hops", spec={}, warnings=[])
    client = TestClient(app, base_url="http://127.0.0.1")
    url, headers = f"/api/v1/experiments/{exp.id}/trials", {"Authorization": "Bearer t"}
    assert client.get(url, headers=headers).json() == {"items": []}  # rendered and kept
    hops: list[str] = []
    real = dependency_utils.run_in_threadpool

    async def counting(func, *args, **kwargs):
        hops.append(getattr(func, "__name__", repr(func)))
        return await real(func, *args, **kwargs)

    monkeypatch.setattr(dependency_utils, "run_in_threadpool", counting)
    again = client.get(url, headers=headers)
    assert again.status_code == 200
    assert again.json() == {"items": []}
    assert hops == []
    assert client.get(url).status_code == 401  # the token check still runs


def test_a_sweep_view_that_finds_its_status_changed_drops_the_sweeps_other_views():
    """The driver (another process) stops the sweep and pauses its trials in one
    transaction: a poll that sees the sweep STOPPED must not get its trials from before."""
    store = {"status": "RUNNING", "trials": "RUNNING"}

    class Sweep(BaseModel):
        status: str

    class Trials(BaseModel):
        status: str

    def sweep() -> Sweep:
        return Sweep(status=store["status"])

    def trials() -> Trials:
        return Trials(status=store["trials"])

    def status_of(view: BaseModel) -> str:
        return view.status

    async def main():
        cache = ViewCache(60, Clock())  # nothing expires: only the change drops views
        seen = []

        async def poll() -> None:
            view = await cache.get("e1/view", sweep, state=status_of)
            listed = await cache.get("e1/trials", trials)
            other = await cache.get("e2/trials", trials)
            seen.append((json.loads(view.body)["status"], json.loads(listed.body)["status"]))
            seen.append(("e2", json.loads(other.body)["status"]))

        await poll()
        store.update(status="STOPPED", trials="PAUSED")  # one transaction, elsewhere
        cache._items.pop("e1/view")  # the sweep's view is due: the next poll renders it
        await poll()
        return seen

    assert asyncio.run(main()) == [
        ("RUNNING", "RUNNING"),
        ("e2", "RUNNING"),
        ("STOPPED", "PAUSED"),
        ("e2", "RUNNING"),  # another sweep's views are kept
    ]


def test_a_sweep_view_whose_state_is_unchanged_keeps_the_other_views():
    async def main():
        cache, render = ViewCache(60, Clock()), Renderer()
        render.version = 5
        await cache.get("e1/view", render, state=lambda v: v.n)
        await cache.get("e1/trials", render)
        cache._items.pop("e1/view")
        await cache.get("e1/view", render, state=lambda v: v.n)  # the same state
        await cache.get("e1/trials", render)  # still kept: not rendered again
        return render.calls

    assert asyncio.run(main()) == 3
