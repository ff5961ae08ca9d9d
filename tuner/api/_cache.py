"""The rendered JSON of polled views, kept a moment."""

from __future__ import annotations

import time
from collections.abc import Callable

from fastapi import Response
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool


class ViewCache:
    """The rendered JSON of polled views, kept `ttl_s` seconds: fifty pages polling one
    sweep cost one query and one serialization, not fifty. The API's own writes (stop,
    resume, delete) drop a sweep's entries at once."""

    def __init__(self, ttl_s: float) -> None:
        self.ttl_s = ttl_s
        self._items: dict[str, tuple[float, bytes]] = {}

    async def get(self, key: str, render: Callable[[], BaseModel]) -> Response:
        """The cached body for `key`, or render() (in a worker thread) and cache it."""
        now = time.monotonic()
        hit = self._items.get(key)
        if hit is None or hit[0] <= now:
            body = (await run_in_threadpool(render)).model_dump_json().encode()
            if len(self._items) > 2000:
                self._items = {k: v for k, v in self._items.items() if v[0] > now}
            hit = self._items[key] = (now + self.ttl_s, body)
        return Response(hit[1], media_type="application/json")

    def invalidate(self, experiment_id: str) -> None:
        """Forgets every cached view of one sweep."""
        for key in [k for k in self._items if k.startswith(f"{experiment_id}/")]:
            self._items.pop(key, None)
