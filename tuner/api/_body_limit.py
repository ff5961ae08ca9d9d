"""The request-size limit (TUNER_MAX_BODY_BYTES): an ASGI middleware, so a body is
refused while it streams in, before any route reads it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from fastapi.responses import JSONResponse

from tuner.errors import TunerError
from tuner.views import Issue


class BodyLimit:
    """Rejects request bodies over `limit` bytes with 413 (declared or streamed), in the
    shape of every bad-input answer (Problems: {detail: [{loc, msg, value}]})."""

    def __init__(self, app: Any, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(
        self,
        scope: dict,
        receive: Callable[[], Awaitable[dict]],
        send: Callable[[dict], Awaitable[None]],
    ) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and int(declared) > self.limit:
            return await self._reject(scope, receive, send)
        seen = 0

        async def limited() -> dict:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.limit:
                raise _TooLarge
            return message

        try:
            await self.app(scope, limited, send)
        except _TooLarge:
            await self._reject(scope, receive, send)

    async def _reject(self, scope: dict, receive: Any, send: Any) -> None:
        problem = Issue(
            loc="(body)", msg=f"request body over {self.limit} bytes (TUNER_MAX_BODY_BYTES)"
        )
        response = JSONResponse({"detail": [problem.model_dump(mode="json")]}, 413)
        await response(scope, receive, send)


class _TooLarge(TunerError):
    pass
