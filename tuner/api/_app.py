"""The FastAPI app, assembled: the resource routers under /api/v1, the middleware
(request-size limit, Host check, security headers), the error answers, the OpenAPI
document, the web page and its offline assets, and the lifespan (store, Ray cluster,
MLflow UI, supervisor loop, validation worker)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import APIRouter, FastAPI
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles
from sqlalchemy.exc import OperationalError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.routing import BaseRoute

import tuner
from tuner.api import _compare, _experiments, _service, _trials
from tuner.api._body_limit import BodyLimit
from tuner.api._cache import ViewCache
from tuner.api._errors import (
    method_not_allowed,
    request_problems,
    store_unavailable,
    unexpected_error,
)
from tuner.api._openapi import openapi_builder
from tuner.api._security import SecurityHeaders, allowed_hosts
from tuner.api._validator import Validator
from tuner.launcher import Launcher, start_mlflow_ui, stop_process_group, wait_for_mlflow_ui
from tuner.service import Supervisor
from tuner.settings import Settings
from tuner.store import Store

log = logging.getLogger("tuner.api")
STATIC = Path(__file__).with_name("static")

# One router per resource, in the order their paths appear in /openapi.json. The public
# one (liveness, statuses) takes no token; every other route does.
ROUTERS = (
    _service.public,
    _experiments.router,
    _trials.router,
    _service.router,
    _compare.router,
)


def plotly_js() -> Path:
    """plotly's bundled JS from the installed Python package (no CDN)."""
    import plotly

    return Path(plotly.__file__).parent / "package_data" / "plotly.min.js"


def _method_routes(app: FastAPI, *routers: APIRouter) -> list[BaseRoute]:
    """Every route of the app that answers HTTP methods: its own, and those of the included
    `routers` (FastAPI 0.16x keeps an included router's routes behind a wrapper with no
    `methods` in app.router.routes, so they are taken from the routers themselves)."""
    own = [r for r in app.router.routes if getattr(r, "methods", None)]
    return own + [r for router in routers for r in router.routes if getattr(r, "methods", None)]


async def _supervise(app: FastAPI) -> None:
    supervisor: Supervisor = app.state.supervisor
    wake: asyncio.Event = app.state.wake_event
    interval = app.state.settings.poll_interval_s
    while True:
        try:
            await asyncio.to_thread(supervisor.tick)
        except Exception:  # noqa: BLE001 - keep supervising; the next tick retries
            log.exception("supervisor tick failed")
        try:
            await asyncio.wait_for(wake.wait(), timeout=interval)
        except TimeoutError:
            pass
        wake.clear()


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    settings: Settings = app.state.settings
    settings.data_path.mkdir(parents=True, exist_ok=True)
    port = app.state.mlflow_ui_port
    # The MLflow UI first, before Ray takes the CPUs, and the server says it is up only
    # once the UI answers too: its URL printed means both work.
    ui = start_mlflow_ui(settings, port) if port else None
    launcher = Launcher(settings)
    app.state.launcher = launcher
    try:
        app.state.store = await asyncio.to_thread(Store, settings.store_url)
        await asyncio.to_thread(launcher.start, settings.embedded_num_cpus)
        if ui is not None:
            await asyncio.to_thread(wait_for_mlflow_ui, ui, port)
    except BaseException:
        # a start that fails (no Ray head, a store it cannot open) leaves nothing running
        if ui is not None:
            await asyncio.to_thread(stop_process_group, ui)
        if launcher.started_head:
            await asyncio.to_thread(launcher.stop_head)
        raise
    app.state.validator = Validator(
        settings.allowed_module_list,
        settings.max_trials,
        max_asha_rungs=settings.max_asha_rungs,
        tracking_uri=settings.tracking_uri,
    )
    loop = asyncio.get_running_loop()
    app.state.wake_event = asyncio.Event()
    app.state.wake = lambda: loop.call_soon_threadsafe(app.state.wake_event.set)
    app.state.supervisor = Supervisor(app.state.store, launcher, settings)
    task = asyncio.create_task(_supervise(app))
    refresher = asyncio.create_task(app.state.view_cache.refresh_forever())
    try:
        yield
    finally:
        if ui is not None:
            await asyncio.to_thread(stop_process_group, ui)
        task.cancel()
        refresher.cancel()
        app.state.validator.close()
        if launcher.started_head:
            await asyncio.to_thread(launcher.stop_head)
        app.state.store.close()


def create_app(settings: Settings | None = None, mlflow_ui_port: int | None = None) -> FastAPI:
    """The tuner API: REST under /api/v1, the web page at /, OpenAPI at /openapi.json.

    Args:
        settings: The service's settings (default: read from the TUNER_* environment).
        mlflow_ui_port: The port of the MLflow UI that `tuner serve --mlflow-ui` runs
            beside the embedded store, if it runs one.

    Returns:
        The FastAPI application.
    """
    app = FastAPI(
        title="tuner",
        version=tuner.__version__,
        lifespan=_lifespan,
        description="Hyperparameter tuning for RL: Ray Tune sweeps over RLlib, tracked in MLflow.",
        # FastAPI's /docs and /redoc pages load their JS from a CDN; machines here are
        # offline, so only the schema itself is served (/openapi.json).
        docs_url=None,
        redoc_url=None,
    )
    app.state.settings = settings or Settings()
    app.state.mlflow_ui_port = mlflow_ui_port
    app.state.view_cache = ViewCache(app.state.settings.view_cache_s)
    for router in ROUTERS:
        app.include_router(router)
    settings = app.state.settings
    app.add_middleware(BodyLimit, limit=settings.max_body_bytes)
    app.add_middleware(
        TrustedHostMiddleware, allowed_hosts=allowed_hosts(settings.host, settings.allowed_hosts)
    )
    app.add_middleware(SecurityHeaders)  # outermost: 400s and 413s carry the headers too
    app.add_exception_handler(RequestValidationError, request_problems)
    app.add_exception_handler(StarletteHTTPException, method_not_allowed)
    app.add_exception_handler(OperationalError, store_unavailable)
    app.add_exception_handler(Exception, unexpected_error)  # a 500 as JSON, never bare text

    @app.get("/", include_in_schema=False)
    def index() -> FileResponse:
        return FileResponse(STATIC / "index.html")

    @app.get("/static/vendor/plotly.min.js", include_in_schema=False)
    def plotly() -> FileResponse:
        return FileResponse(plotly_js(), media_type="application/javascript")

    if STATIC.is_dir():
        app.mount("/static", StaticFiles(directory=STATIC), name="static")
    app.state.method_routes = _method_routes(app, *ROUTERS)  # for a 405's Allow header
    app.openapi = openapi_builder(app, app.state.method_routes)
    return app


__all__ = ["create_app"]
