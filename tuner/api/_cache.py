"""The rendered JSON of polled views, kept a moment."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Hashable

from fastapi import Response
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool


class ViewCache:
    """The rendered JSON of polled views: fifty pages polling one sweep cost one query
    and one serialization, not fifty, and only one of them waits for it.

    A view is served as kept for `ttl_s` seconds. The first poll after that renders it
    again (in a worker thread, serialization included) and waits, so a poll on its own
    never gets a view older than `ttl_s`; the polls that arrive while that render runs
    get the body kept at once, if it is under `5 * ttl_s` old, instead of waiting too.
    One render per view at a time. The API's own writes (stop, resume, delete) drop a
    sweep's views and its renders under way: the next poll renders anew. So does a
    change that a render of the sweep's own view finds (its `state`: the driver, another
    process, moved the sweep to STOPPED or named its answer): a trials view kept from
    before is never served beside a sweep view from after.

    With `refresh_forever` running (the app's lifespan starts it), a view polled in the
    last `HOT_S` seconds is rendered again every half `ttl_s`, so that a poll finds it
    fresh and never waits for a render: what it costs is the same renders as before,
    off the request path, and a few more for a lone poller (the page's 2 s rate)."""

    STALE_FACTOR = 4
    HOT_S = 5.0  # a view polled this recently is kept fresh: above the page's 2 s rate

    def __init__(self, ttl_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl_s = ttl_s
        self._clock = clock
        self._items: dict[str, tuple[float, bytes]] = {}  # key -> (render began, body)
        self._flights: dict[str, asyncio.Future[bytes]] = {}
        self._epochs: dict[str, int] = {}  # experiment id -> writes seen (invalidate)
        self._hot: dict[str, tuple[float, Render]] = {}  # key -> (polled, render)
        self._states: dict[str, Hashable] = {}  # experiment id -> state its view last showed

    async def get(
        self,
        key: str,
        render: Callable[[], BaseModel],
        state: Callable[[BaseModel], Hashable] | None = None,
    ) -> Response:
        """The cached body for `key`; render() (in a worker thread) when it is stale.

        Args:
            key: "<experiment id>/<view>".
            render: Renders the view from the store.
            state: For the sweep's own view: what of it the sweep's other views depend
                on (its status, its answer). A render that finds it changed drops the
                sweep's other views and their renders under way.

        Returns:
            The view's JSON body.
        """
        now = self._clock()
        render = Render(render, state)
        self._hot[key] = (now, render)
        hit = self._items.get(key)
        age = now - hit[0] if hit is not None else math.inf
        if hit is not None and age < self.ttl_s:
            return _json(hit[1])
        flight = self._flights.get(key)
        if flight is not None and flight.get_loop() is not asyncio.get_running_loop():
            flight = None  # of another event loop (a test client runs one per request)
        if flight is None:  # this poll refreshes the view, and waits for it
            flight = self._flights[key] = asyncio.ensure_future(self._render(key, render))
            flight.add_done_callback(_retrieve)
        elif hit is not None and age < self.ttl_s * (1 + self.STALE_FACTOR):
            return _json(hit[1])  # another poll is refreshing it: the body kept, at once
        return _json(await asyncio.shield(flight))

    async def _render(self, key: str, render: Render) -> bytes:
        experiment_id = key.split("/", 1)[0]
        epoch = self._epochs.get(experiment_id, 0)
        began = self._clock()
        try:
            seen, body = await run_in_threadpool(render.body)
        finally:
            if self._flights.get(key) is asyncio.current_task():
                self._flights.pop(key, None)
        kept = self._epochs.get(experiment_id, 0) == epoch  # no write since it began
        if render.state is not None:
            if self._states.get(experiment_id, _UNSEEN) != seen:
                self.invalidate(experiment_id)  # the other views may be from before it
            self._states[experiment_id] = seen
        if kept:
            if len(self._items) > 2000:
                horizon = self._clock() - self.ttl_s * (1 + self.STALE_FACTOR)
                self._items = {k: v for k, v in self._items.items() if v[0] > horizon}
            self._items[key] = (began, body)
        return body

    async def refresh_forever(self) -> None:
        """Renders every view polled in the last `HOT_S` s again once it is half `ttl_s`
        old, until cancelled. Run it as a task of the event loop the polls use. With
        `ttl_s` 0 nothing is kept, so nothing is refreshed."""
        while self.ttl_s > 0:
            await asyncio.sleep(self.ttl_s / 4)
            self.refresh_due()

    def refresh_due(self) -> None:
        """Starts a render of each hot view that is half `ttl_s` old (none for a view a
        render is under way for); forgets views not polled in `HOT_S` seconds."""
        now = self._clock()
        for key, (polled, render) in list(self._hot.items()):
            if now - polled > self.HOT_S:
                del self._hot[key]
                continue
            hit = self._items.get(key)
            if key in self._flights or (hit is not None and now - hit[0] < self.ttl_s / 2):
                continue
            flight = self._flights[key] = asyncio.ensure_future(self._refresh(key, render))
            flight.add_done_callback(_retrieve)

    async def _refresh(self, key: str, render: Render) -> bytes:
        """A background render. One that fails (the sweep deleted, the store down) stops
        the view's refreshes until it is polled again, and that poll gets the error; the
        view is cooled in the same step that ends the flight, so whoever sees the
        flight gone sees the view cooled."""
        try:
            return await self._render(key, render)
        except Exception:
            self._hot.pop(key, None)
            raise

    def invalidate(self, experiment_id: str) -> None:
        """Forgets every cached view of one sweep, and the renders under way (they run
        on for the polls waiting on them; what they render is not kept). Call it on the
        event loop, as `get` runs (the routes' writes do)."""
        self._epochs[experiment_id] = self._epochs.get(experiment_id, 0) + 1
        prefix = f"{experiment_id}/"
        for key in [k for k in list(self._items) if k.startswith(prefix)]:
            self._items.pop(key, None)
        for key in [k for k in list(self._flights) if k.startswith(prefix)]:
            self._flights.pop(key, None)


_UNSEEN = object()


class Render:
    """A view's render, and what of the view its sweep's other views depend on."""

    def __init__(
        self, render: Callable[[], BaseModel], state: Callable[[BaseModel], Hashable] | None
    ) -> None:
        self.render = render
        self.state = state

    def body(self) -> tuple[Hashable, bytes]:
        """Renders the view (in a worker thread): its state and its JSON."""
        view = self.render()
        seen = self.state(view) if self.state is not None else None
        return seen, view.model_dump_json().encode()


def _json(body: bytes) -> Response:
    return Response(body, media_type="application/json")


def _retrieve(flight: asyncio.Future[bytes]) -> None:
    """Marks a refresh's error as seen: the polls that awaited it got it; one that no
    poll awaited (a stale body was served) is rendered again by the next poll."""
    if not flight.cancelled():
        flight.exception()
