"""Dependencies shared by the routes: settings, store, token check, validation pool."""

from __future__ import annotations

import secrets
from typing import Annotated

from fastapi import Depends, HTTPException, Request, status

from tuner.settings import Settings
from tuner.store import Store


def get_settings(request: Request) -> Settings:
    """The app's settings."""
    return request.app.state.settings


def get_store(request: Request) -> Store:
    """The app's store."""
    return request.app.state.store


def require_token(request: Request, settings: Annotated[Settings, Depends(get_settings)]) -> None:
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
