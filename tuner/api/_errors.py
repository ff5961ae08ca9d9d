"""The answers the app gives before or instead of a route's own: a bad parameter (422,
by field, as a bad spec), a method a path does not take (405 with every allowed
method), a store that refuses (503)."""

from __future__ import annotations

import logging

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from tuner.views import Issue

log = logging.getLogger("tuner.api")


async def store_unavailable(request: Request, exc: Exception) -> JSONResponse:
    """The store refused a read or a write (a read-only or full disk, a database that is
    down): 503 with what it said, never a 500. Each write is one transaction, so the one
    refused left nothing half-written; the request can be sent again once it is back."""
    first = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0][:300]
    log.warning("store unavailable on %s %s: %s", request.method, request.url.path, first)
    return JSONResponse(
        {
            "detail": f"the store is unavailable ({first}); nothing was changed: send the "
            "request again once it is writable"
        },
        503,
        headers={"Retry-After": "10"},
    )


async def unexpected_error(request: Request, exc: Exception) -> JSONResponse:
    """Any other failure: a 500 that still says what failed, as JSON like every other
    answer (a client reads `detail`, never a bare "Internal Server Error"); the server's
    log has its traceback (Starlette raises the error on after this answer)."""
    said = str(exc).strip()
    what = type(exc).__name__ + (": " + said.splitlines()[0][:300] if said else "")
    detail = f"internal error on {request.method} {request.url.path}: {what}"
    return JSONResponse({"detail": f"{detail} (the server's log has the traceback)"}, 500)


async def request_problems(request: Request, exc: Exception) -> JSONResponse:
    """A bad path or query parameter gets the same 422 shape as a bad spec:
    `detail` lists {loc, msg, value}, `loc` the parameter's name."""
    assert isinstance(exc, RequestValidationError)
    detail = []
    for err in exc.errors():
        parts = [str(p) for p in err.get("loc", ())]
        if parts and parts[0] in ("query", "path", "header", "cookie", "body"):
            parts = parts[1:]
        value = err.get("input")
        detail.append(
            Issue(
                loc=".".join(parts) or "(request)",
                msg=str(err.get("msg", "")).removeprefix("Value error, "),
                value=value if isinstance(value, str | int | float | bool | None) else None,
            ).model_dump(mode="json")
        )
    return JSONResponse({"detail": detail}, status_code=422)


async def method_not_allowed(request: Request, exc: Exception) -> Response:
    """405 with an Allow header listing every method of every route at this path (several
    routes share a path, Starlette names only the first one's)."""
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code != 405:
        return JSONResponse({"detail": exc.detail}, exc.status_code, headers=exc.headers)
    methods: set[str] = set()
    for route in request.app.state.method_routes:
        match, _ = route.matches({**request.scope, "method": "GET"})
        if match != Match.NONE:
            methods |= set(route.methods)
    if "GET" in methods:
        methods.add("HEAD")
    return JSONResponse(
        {"detail": f"{request.method} is not allowed here"},
        405,
        headers={"Allow": ", ".join(sorted(methods))},
    )
