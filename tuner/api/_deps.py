"""What routes are given, as FastAPI dependencies: settings, store, launcher, validator,
view cache, the supervisor's wake-up, and the token check. Routes never read app.state.

Each is `async def`: none blocks, and FastAPI runs a plain `def` dependency in its thread
pool, a thread hop per dependency per request (under 50 pollers, a quarter of the API's
CPU went to waking those threads)."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Annotated

from fastapi import Depends, HTTPException, Request, status

from tuner.api._cache import ViewCache
from tuner.api._validator import Validator
from tuner.launcher import Launcher
from tuner.settings import Settings
from tuner.store import Store


async def get_settings(request: Request) -> Settings:
    """The app's settings."""
    return request.app.state.settings


async def get_store(request: Request) -> Store:
    """The app's store."""
    return request.app.state.store


async def get_launcher(request: Request) -> Launcher:
    """The app's handle on its Ray cluster (jobs and nodes)."""
    return request.app.state.launcher


async def get_validator(request: Request) -> Validator:
    """The worker process that parses and validates specs."""
    return request.app.state.validator


async def get_view_cache(request: Request) -> ViewCache:
    """The short-lived cache of polled views."""
    return request.app.state.view_cache


async def get_wake(request: Request) -> Callable[[], None]:
    """Wakes the supervisor at once (after a submit or a status change)."""
    return request.app.state.wake


async def require_token(
    request: Request, settings: Annotated[Settings, Depends(get_settings)]
) -> None:
    """With TUNER_API_TOKEN set, requires `Authorization: Bearer <token>` (constant time)."""
    origin = request.headers.get("origin")
    if origin and request.method not in ("GET", "HEAD", "OPTIONS"):
        # A page on another site must not drive this API through the user's browser.
        if origin.split("://", 1)[-1].rstrip("/") != request.headers.get("host", ""):
            raise HTTPException(
                status.HTTP_403_FORBIDDEN, detail=f"cross-site request from {origin!r} refused"
            )
    if not settings.api_token:
        return
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not secrets.compare_digest(
        token.encode(), settings.api_token.encode()
    ):
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            detail="missing or wrong bearer token",
            headers={"WWW-Authenticate": "Bearer"},
        )


SettingsDep = Annotated[Settings, Depends(get_settings)]
StoreDep = Annotated[Store, Depends(get_store)]
LauncherDep = Annotated[Launcher, Depends(get_launcher)]
ValidatorDep = Annotated[Validator, Depends(get_validator)]
ViewCacheDep = Annotated[ViewCache, Depends(get_view_cache)]
WakeDep = Annotated[Callable[[], None], Depends(get_wake)]
