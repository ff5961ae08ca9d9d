"""The FastAPI app: lifespan (store, Ray cluster, supervisor loop, validation worker),
request-size limit, the web page and its offline assets."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.routing import APIRoute
from fastapi.staticfiles import StaticFiles
from sqlalchemy.exc import OperationalError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.routing import BaseRoute

import tuner
from tuner.api import _compare, _experiments, _service, _trials
from tuner.api._cache import ViewCache
from tuner.api._deps import get_store, require_token
from tuner.api._security import SecurityHeaders, allowed_hosts
from tuner.api._validator import Validator
from tuner.launcher import Launcher, start_mlflow_ui, stop_process_group, wait_for_mlflow_ui
from tuner.service import Supervisor
from tuner.settings import Settings
from tuner.spec import IMPORT_PATH_RE, ExperimentSpec
from tuner.store import Store
from tuner.views import Issue, Problems

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


class _TooLarge(Exception):
    pass


async def _store_unavailable(request: Request, exc: Exception) -> JSONResponse:
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


async def _request_problems(request: Request, exc: Exception) -> JSONResponse:
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


def _declare_problems(schema: dict, components: dict) -> None:
    """Every 422 is ours ({detail: [{loc, msg, value}]}, see _request_problems), not
    FastAPI's HTTPValidationError: declare that shape on every operation."""
    problems = Problems.model_json_schema(ref_template="#/components/schemas/{model}")
    components.update(problems.pop("$defs", {}))
    components["Problems"] = problems
    ref = {"application/json": {"schema": {"$ref": "#/components/schemas/Problems"}}}
    for operations in schema.get("paths", {}).values():
        for operation in operations.values():
            responses = operation.setdefault("responses", {})
            if "422" in responses or operation.get("parameters") or "requestBody" in operation:
                responses["422"] = {"description": "Bad input, by field", "content": ref}
    components.pop("HTTPValidationError", None)
    components.pop("ValidationError", None)


# Where a new sweep's id leads (OpenAPI links): clients and schema-driven testers follow
# them from `POST /experiments` to the per-sweep operations.
_SWEEP_LINKS = {
    "GetExperiment": "get_experiment",
    "ListTrials": "list_trials",
    "MetricSeries": "metric_series",
    "StopExperiment": "stop_experiment",
    "ResumeExperiment": "resume_experiment",
    "DeleteExperiment": "delete_experiment",
}


def _link_sweep_operations(schema: dict) -> None:
    created = schema["paths"]["/api/v1/experiments"]["post"]["responses"]["201"]
    created["links"] = {
        name: {"operationId": op, "parameters": {"experiment_id": "$response.body#/id"}}
        for name, op in _SWEEP_LINKS.items()
    }
    # a sweep's trials -> the first one's metrics (a client, or schemathesis's stateful
    # phase, reaches the per-trial route from a real trial id)
    listed = schema["paths"]["/api/v1/experiments/{experiment_id}/trials"]["get"]["responses"]
    listed["200"]["links"] = {
        "TrialMetrics": {
            "operationId": "trial_metrics",
            "parameters": {
                "experiment_id": "$request.path.experiment_id",
                "trial_id": "$response.body#/items/0/trial_id",
            },
        }
    }


def _env_required_for_rllib(spec_schema: dict) -> None:
    """The spec's conditional requirement, in the schema: an RLlib algorithm (a name, no
    ':') needs an env id or import path; only a training loop of your own may omit it."""
    spec_schema["if"] = {
        "properties": {"algorithm": {"type": "string", "pattern": ":"}},
        "required": ["algorithm"],
    }
    spec_schema["else"] = {
        "required": ["env"],
        "properties": {"env": {"type": "string", "minLength": 1}},
    }


def _declare_field_rules(components: dict) -> None:
    """Rules of one field that the spec's models check but their JSON schema leaves out, in
    the schema: each callback and the module are import paths ('package.module:Name'), a
    stop.metrics key is a result key as `metric` is, multi_agent.policies names each
    policy once, and a search-space domain is exactly one of its kinds, not null. (Whether
    the operator allows a module, gymnasium registers an env id or RLlib takes a setting,
    and rules across fields, stay a 422 that no schema can foretell.)"""
    spec = components["ExperimentSpec"]["properties"]
    spec["callbacks"]["items"] = {"type": "string", "pattern": IMPORT_PATH_RE.pattern}
    for branch in spec["module"].get("anyOf", []):
        if branch.get("type") == "string":
            branch["pattern"] = IMPORT_PATH_RE.pattern
    metrics = components["StopSpec"]["properties"]["metrics"]
    metrics["propertyNames"] = {"pattern": spec["metric"]["pattern"]}
    components["MultiAgentSpec"]["properties"]["policies"]["uniqueItems"] = True
    domain = components["Domain"]
    domain.update(minProperties=1, maxProperties=1)
    for name, field in domain["properties"].items():
        kinds = [b for b in field.get("anyOf", []) if b.get("type") != "null"]
        if len(kinds) == 1:
            kept = {k: v for k, v in field.items() if k not in ("anyOf", "default")}
            domain["properties"][name] = {**kinds[0], **kept}


def _depends_on(dependant: Any, call: Callable) -> bool:
    return any(d.call is call or _depends_on(d, call) for d in dependant.dependencies)


def _declare_guard_answers(schema: dict, routes: list[BaseRoute]) -> None:
    """The answers a route's dependencies give before its own code runs, declared on each
    operation: 401 (TUNER_API_TOKEN set, no or a wrong bearer token) and 403 (a state
    change from another origin) where the token check guards it, 503 (the store
    refused: _store_unavailable) where it reads the store."""
    problem = {"application/json": {"schema": {"$ref": "#/components/schemas/Problem"}}}
    answers = {
        "401": "TUNER_API_TOKEN is set and the bearer token is missing or wrong",
        "403": "A state-changing request from a page of another origin",
        "503": "The store is unavailable; nothing was changed, send the request again",
    }
    for route in routes:
        if not isinstance(route, APIRoute) or not route.include_in_schema:
            continue
        guarded = _depends_on(route.dependant, require_token)
        stored = _depends_on(route.dependant, get_store)
        for method in route.methods:
            operation = schema["paths"].get(route.path_format, {}).get(method.lower())
            if operation is None:
                continue
            codes = []
            if guarded:
                codes.append("401")
                if method not in ("GET", "HEAD", "OPTIONS"):
                    codes.append("403")
            if stored:
                codes.append("503")
            responses = operation.setdefault("responses", {})
            for code in codes:
                responses.setdefault(code, {"description": answers[code], "content": problem})
            if "503" in codes:
                responses["503"].setdefault(
                    "headers",
                    {"Retry-After": {"description": "Seconds", "schema": {"type": "string"}}},
                )


def _method_routes(app: FastAPI, *routers: APIRouter) -> list[BaseRoute]:
    """Every route of the app that answers HTTP methods: its own, and those of the included
    `routers` (FastAPI 0.16x keeps an included router's routes behind a wrapper with no
    `methods` in app.router.routes, so they are taken from the routers themselves)."""
    own = [r for r in app.router.routes if getattr(r, "methods", None)]
    return own + [r for router in routers for r in router.routes if getattr(r, "methods", None)]


async def _method_not_allowed(request: Request, exc: Exception) -> Response:
    """405 with an Allow header listing every method of every route at this path (several
    routes share a path, Starlette names only the first one's)."""
    from starlette.exceptions import HTTPException as StarletteHTTPException
    from starlette.routing import Match

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


def _openapi(app: FastAPI) -> Callable[[], dict]:
    def build() -> dict:
        if app.openapi_schema:
            return app.openapi_schema
        schema = get_openapi(
            title=app.title, version=app.version, routes=app.routes, description=app.description
        )
        spec_schema = ExperimentSpec.model_json_schema(ref_template="#/components/schemas/{model}")
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        components.update(spec_schema.pop("$defs", {}))
        components["ExperimentSpec"] = spec_schema
        _env_required_for_rllib(spec_schema)
        _declare_field_rules(components)
        _declare_problems(schema, components)
        _declare_guard_answers(schema, _method_routes(app, *ROUTERS))
        _link_sweep_operations(schema)
        app.openapi_schema = schema
        return schema

    return build


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
    """The tuner API: REST under /api/v1, the web page at /, OpenAPI at /openapi.json."""
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
    app.openapi = _openapi(app)
    settings = app.state.settings
    app.add_middleware(BodyLimit, limit=settings.max_body_bytes)
    app.add_middleware(
        TrustedHostMiddleware, allowed_hosts=allowed_hosts(settings.host, settings.allowed_hosts)
    )
    app.add_middleware(SecurityHeaders)  # outermost: 400s and 413s carry the headers too
    app.add_exception_handler(RequestValidationError, _request_problems)
    app.add_exception_handler(StarletteHTTPException, _method_not_allowed)
    app.add_exception_handler(OperationalError, _store_unavailable)

    @app.get("/", include_in_schema=False)
    def index() -> FileResponse:
        return FileResponse(STATIC / "index.html")

    @app.get("/static/vendor/plotly.min.js", include_in_schema=False)
    def plotly() -> FileResponse:
        return FileResponse(plotly_js(), media_type="application/javascript")

    if STATIC.is_dir():
        app.mount("/static", StaticFiles(directory=STATIC), name="static")
    app.state.method_routes = _method_routes(app, *ROUTERS)  # for a 405's Allow header
    return app


__all__ = ["create_app"]
