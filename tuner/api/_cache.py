"""The rendered JSON of polled views, kept a moment."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from fastapi import Response
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool


class ViewCache:
    """The rendered JSON of polled views: fifty pages polling one sweep cost one query
    and one serialization, not fifty, and none of them waits for it.

    A view is fresh for `ttl_s` seconds. For `4 * ttl_s` more it is stale: it is still
    served at once while one refresh renders it again in a worker thread, so a poll
    never waits for the store unless no body, or only a staler one, is kept (a view is
    then at most `5 * ttl_s` old). One render per view at a time, however many polls
    arrive while it runs. The API's own writes (stop, resume, delete) drop a sweep's
    entries and its refreshes in flight at once: the next poll renders anew."""

    STALE_FACTOR = 4

    def __init__(self, ttl_s: float) -> None:
        self.ttl_s = ttl_s
        self._items: dict[str, tuple[float, bytes]] = {}  # key -> (render began, body)
        self._flights: dict[str, asyncio.Future[bytes]] = {}
        self._epochs: dict[str, int] = {}  # experiment id -> writes seen (invalidate)

    async def get(self, key: str, render: Callable[[], BaseModel]) -> Response:
        """The cached body for `key`; render() (in a worker thread) when it is stale."""
        hit = self._items.get(key)
        age = time.monotonic() - hit[0] if hit is not None else None
        if hit is not None and age is not None and age < self.ttl_s:
            return _json(hit[1])
        flight = self._flights.get(key)
        if flight is None:
            flight = self._flights[key] = asyncio.ensure_future(self._render(key, render))
            flight.add_done_callback(_retrieve)
        if hit is not None and age is not None and age < self.ttl_s * (1 + self.STALE_FACTOR):
            return _json(hit[1])  # the refresh lands for a later poll
        return _json(await asyncio.shield(flight))

    async def _render(self, key: str, render: Callable[[], BaseModel]) -> bytes:
        experiment_id = key.split("/", 1)[0]
        epoch = self._epochs.get(experiment_id, 0)
        began = time.monotonic()
        try:
            body = await run_in_threadpool(lambda: render().model_dump_json().encode())
        finally:
            if self._flights.get(key) is asyncio.current_task():
                del self._flights[key]
        if self._epochs.get(experiment_id, 0) == epoch:  # no write since it began
            if len(self._items) > 2000:
                horizon = time.monotonic() - self.ttl_s * (1 + self.STALE_FACTOR)
                self._items = {k: v for k, v in self._items.items() if v[0] > horizon}
            self._items[key] = (began, body)
        return body

    def invalidate(self, experiment_id: str) -> None:
        """Forgets every cached view of one sweep, and the renders under way (they run
        on for the polls waiting on them; what they render is not kept)."""
        self._epochs[experiment_id] = self._epochs.get(experiment_id, 0) + 1
        prefix = f"{experiment_id}/"
        for key in [k for k in self._items if k.startswith(prefix)]:
            del self._items[key]
        for key in [k for k in self._flights if k.startswith(prefix)]:
            del self._flights[key]


def _json(body: bytes) -> Response:
    return Response(body, media_type="application/json")


def _retrieve(flight: asyncio.Future[bytes]) -> None:
    """Marks a refresh's error as seen: the polls that awaited it got it; one that no
    poll awaited (a stale body was served) is rendered again by the next poll."""
    if not flight.cancelled():
        flight.exception()
