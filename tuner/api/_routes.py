"""Routes under /api/v1: thin, the work is in tuner.service and the store."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path as FilePath
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Path, Query, Request, Response, status
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.concurrency import run_in_threadpool

import tuner
from tuner import algorithms as registry
from tuner import compare, service
from tuner import purge as purging
from tuner.algorithms import AlgorithmInfo
from tuner.api._cache import ViewCache
from tuner.api._deps import (
    LauncherDep,
    SettingsDep,
    StoreDep,
    ValidatorDep,
    ViewCacheDep,
    WakeDep,
    require_token,
)
from tuner.api._procs import in_fresh_process
from tuner.compare import Comparison
from tuner.mlflow_names import RETURN_KEY
from tuner.statuses import SweepStatus
from tuner.store import ExperimentRecord, Store
from tuner.views import (
    ClusterView,
    ExampleSpec,
    ExperimentList,
    ExperimentView,
    Health,
    Issue,
    MetricSeries,
    NodeView,
    Plan,
    Problem,
    Problems,
    StatusList,
    TrialList,
    TrialMetrics,
    with_mlflow_url,
)


def _operation_id(route: APIRoute) -> str:
    return route.name  # the function's name: create_experiment, get_experiment, ...


router = APIRouter(
    prefix="/api/v1",
    dependencies=[Depends(require_token)],
    generate_unique_id_function=_operation_id,
)
public = APIRouter(prefix="/api/v1", generate_unique_id_function=_operation_id)
NOT_FOUND = {404: {"model": Problem}}

# A sweep's id as the store issues it: 12 lowercase hex digits. The schema says so (clients
# and schema-driven testers make ids of that form); an id of another form names no sweep,
# a 404 as for an unknown one.
SWEEP_ID_PATTERN = r"^[0-9a-f]{12}$"
ExperimentId = Annotated[
    str,
    Path(
        description="The sweep's id, as `POST /experiments` returned it (12 hex digits).",
        json_schema_extra={"pattern": SWEEP_ID_PATTERN},
    ),
]


def experiment_view(store: Store, rec: ExperimentRecord) -> ExperimentView:
    """The public view of a stored sweep."""
    return ExperimentView.from_record(
        rec, store.trial_counts(rec.id), service.scheduler_in_force_of(rec.spec)
    )


def _get(store: Store, experiment_id: str) -> ExperimentRecord:
    rec = store.get_experiment(experiment_id)
    if rec is None:
        raise HTTPException(404, detail=f"no sweep {experiment_id!r}")
    return rec


async def _change(
    store: Store,
    cache: ViewCache,
    wake: Callable[[], None],
    experiment_id: str,
    action: Callable[[Store, str], ExperimentRecord],
) -> ExperimentView:
    """Applies a status change (404 if unknown, 409 if not allowed now), drops the sweep's
    cached views and wakes the supervisor. The store work runs in a worker thread; the
    cache is touched only here, on the event loop, as its polls are."""

    def apply() -> ExperimentRecord:
        _get(store, experiment_id)
        return action(store, experiment_id)

    try:
        rec = await run_in_threadpool(apply)
    except service.Conflict as err:
        raise _conflict(err) from None
    cache.invalidate(experiment_id)
    wake()
    return await run_in_threadpool(experiment_view, store, rec)


def _conflict(err: service.Conflict) -> HTTPException:
    return HTTPException(409, detail=str(err))


@public.get("/healthz", response_model=Health, tags=["service"])
def healthz(store: StoreDep, launcher: LauncherDep) -> Health:
    """Liveness: the store answers; the Ray address the service submits to."""
    store.count_by_status({SweepStatus.RUNNING})
    return Health(
        status="ok",
        version=tuner.__version__,
        ray_address=launcher.address,
        store=store.url.get_backend_name(),
    )


@public.get("/statuses", response_model=StatusList, tags=["service"])
def statuses() -> StatusList:
    """The statuses a sweep and a trial can have, and which of a sweep's are terminal,
    stoppable and resumable (what the web page acts on). Public, as the OpenAPI schema
    that lists them: no token needed."""
    return StatusList.current()


def _body_kind(request: Request) -> bool:
    """True for YAML, False for JSON; anything else is 415, which also makes browsers
    preflight cross-site requests (a text/plain POST from another page never gets in)."""
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype in ("application/json", ""):
        return False
    if ctype in ("application/yaml", "application/x-yaml", "text/yaml"):
        return True
    raise HTTPException(
        415, detail=f"send the spec as application/json or application/yaml, not {ctype!r}"
    )


# A spec that runs in seconds on one CPU: the docs show it, and schema-driven testers
# (schemathesis) draw it among their bodies, so their stateful phase gets a 201 and follows
# its links to the per-sweep operations.
_SPEC_EXAMPLES = {
    "cartpole-ppo": {
        "summary": "PPO on CartPole, one tiny trial",
        "value": {
            "name": "cartpole-ppo",
            "algorithm": "PPO",
            "env": "CartPole-v1",
            "config": {
                "train_batch_size_per_learner": 128,
                "minibatch_size": 64,
                "num_epochs": 1,
            },
            "model": {"fcnet_hiddens": [16]},
            "search": {"method": "grid", "space": {"lr": {"grid": [0.001]}}},
            "stop": {"training_iteration": 1},
            "max_concurrent_trials": 1,
        },
    }
}
_SPEC_SCHEMA = {"$ref": "#/components/schemas/ExperimentSpec"}
_SPEC_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {"schema": _SPEC_SCHEMA, "examples": _SPEC_EXAMPLES},
            "application/yaml": {"schema": _SPEC_SCHEMA, "examples": _SPEC_EXAMPLES},
        },
    }
}


@router.post(
    "/experiments",
    status_code=status.HTTP_201_CREATED,
    response_model=ExperimentView,
    responses={
        200: {"model": Plan, "description": "With dry_run: the plan; nothing stored."},
        413: {"model": Problems},
        415: {"model": Problem},
        422: {"model": Problems},
        429: {"model": Problems},
    },
    openapi_extra=_SPEC_BODY,
    tags=["experiments"],
)
async def create_experiment(
    request: Request,
    store: StoreDep,
    settings: SettingsDep,
    launcher: LauncherDep,
    validator: ValidatorDep,
    wake: WakeDep,
    dry_run: Annotated[
        bool,
        Query(
            description="Plan only: nothing is stored or launched; 200 with the plan "
            "(trials, resources, concurrency, fit, problems by field)."
        ),
    ] = False,
) -> ExperimentView | JSONResponse:
    """Validates a spec (JSON or YAML body) and queues the sweep; returns at once.

    422: `detail` lists each problem as {loc (field path), msg, value}, including a
    trial that needs more CPUs / GPUs than the cluster's nodes have."""
    yaml_body = _body_kind(request)
    nodes = None
    if settings.cluster_fit_check or dry_run:
        nodes = await run_in_threadpool(launcher.cluster_nodes)
    if dry_run:
        planned = await validator.check(
            await request.body(), yaml_body, nodes, plan=True, check_fit=settings.cluster_fit_check
        )
        if "issues" in planned:
            raise HTTPException(planned.get("status", 422), detail=planned["issues"])
        return JSONResponse(Plan.model_validate(planned["plan"]).model_dump(mode="json"))
    checked = await validator.check(await request.body(), yaml_body, nodes)
    if "issues" in checked:
        raise HTTPException(checked.get("status", 422), detail=checked["issues"])
    try:
        rec = await run_in_threadpool(
            service.submit,
            store,
            checked["spec"],
            checked["warnings"],
            settings.max_active_sweeps,
        )
    except service.TooMany as err:
        problem = [Issue(loc="(service)", msg=str(err)).model_dump(mode="json")]
        raise HTTPException(429, detail=problem) from None
    wake()
    return await run_in_threadpool(experiment_view, store, rec)


@router.get("/experiments", response_model=ExperimentList, tags=["experiments"])
def list_experiments(
    store: StoreDep,
    status_: Annotated[
        SweepStatus | None, Query(alias="status", description="Filter by status.")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    offset: Annotated[int, Query(ge=0, le=1_000_000_000)] = 0,
) -> ExperimentList:
    """Sweeps, newest first, one page at a time."""
    records, total = store.list_experiments(status=status_, limit=limit, offset=offset)
    return ExperimentList(
        items=[experiment_view(store, r) for r in records], total=total, limit=limit, offset=offset
    )


@router.get(
    "/experiments/{experiment_id}",
    response_model=ExperimentView,
    responses=NOT_FOUND,
    tags=["experiments"],
)
async def get_experiment(
    experiment_id: ExperimentId, store: StoreDep, cache: ViewCacheDep
) -> Response:
    """Spec, status, trial counts, best trial (config, metric, checkpoint), MLflow links."""
    return await cache.get(
        f"{experiment_id}/view", lambda: experiment_view(store, _get(store, experiment_id))
    )


@router.get(
    "/experiments/{experiment_id}/trials",
    response_model=TrialList,
    responses=NOT_FOUND,
    tags=["experiments"],
)
async def list_trials(
    experiment_id: ExperimentId, store: StoreDep, settings: SettingsDep, cache: ViewCacheDep
) -> Response:
    """Every trial: status, sampled values, progress, metric, error, node, MLflow run."""

    def render() -> TrialList:
        rec = _get(store, experiment_id)
        mlflow_exp = (rec.mlflow or {}).get("experiment_id")
        items = [
            with_mlflow_url(t, settings.mlflow_ui_url, mlflow_exp)
            for t in store.list_trials(experiment_id)
        ]
        return TrialList(items=items)

    return await cache.get(f"{experiment_id}/trials", render)


@router.get(
    "/experiments/{experiment_id}/trials/{trial_id}/metrics",
    response_model=TrialMetrics,
    responses=NOT_FOUND,
    tags=["experiments"],
)
def trial_metrics(
    experiment_id: ExperimentId,
    trial_id: Annotated[str, Path(description="The trial's id, as the sweep's trials list it.")],
    store: StoreDep,
    keys: Annotated[str | None, Query(description="Comma-separated metric keys.")] = None,
) -> TrialMetrics:
    """A trial's per-iteration metrics."""
    _get(store, experiment_id)
    if store.get_trial(experiment_id, trial_id) is None:
        raise HTTPException(404, detail=f"no trial {trial_id!r} in sweep {experiment_id!r}")
    wanted = [k for k in keys.split(",") if k] if keys else None
    points = store.metric_history(experiment_id, trial_id, keys=wanted)
    return TrialMetrics(trial_id=trial_id, points=points)


@router.get(
    "/experiments/{experiment_id}/metrics",
    response_model=MetricSeries,
    responses=NOT_FOUND,
    tags=["experiments"],
)
async def metric_series(
    experiment_id: ExperimentId,
    store: StoreDep,
    cache: ViewCacheDep,
    key: Annotated[
        str | None,
        Query(description="Metric key; default the spec metric.", max_length=200),
    ] = None,
) -> Response:
    """One metric of every trial, for learning curves: trial_id -> [[env_steps, value]]
    (served from a short cache, as the sweep and trial views)."""

    def render() -> MetricSeries:
        rec = _get(store, experiment_id)
        name = key or rec.spec.get("metric", RETURN_KEY)
        return MetricSeries(key=name, series=store.metric_series(experiment_id, name))

    return await cache.get(f"{experiment_id}/metrics/{key or ''}", render)


@router.post(
    "/experiments/{experiment_id}/stop",
    response_model=ExperimentView,
    status_code=202,
    responses={**NOT_FOUND, 409: {"model": Problem}},
    tags=["experiments"],
)
async def stop_experiment(
    experiment_id: ExperimentId, store: StoreDep, cache: ViewCacheDep, wake: WakeDep
) -> ExperimentView:
    """Stops a sweep (STOPPING, then STOPPED): Tune saves its state and the trials end,
    resumable from their last checkpoint; a job that does not end within
    TUNER_STOP_TIMEOUT_S is stopped through Ray."""
    return await _change(store, cache, wake, experiment_id, service.request_stop)


@router.post(
    "/experiments/{experiment_id}/resume",
    response_model=ExperimentView,
    status_code=202,
    responses={**NOT_FOUND, 409: {"model": Problem}},
    tags=["experiments"],
)
async def resume_experiment(
    experiment_id: ExperimentId, store: StoreDep, cache: ViewCacheDep, wake: WakeDep
) -> ExperimentView:
    """Continues a PARTIAL, STOPPED or FAILED sweep from Tune's state (same MLflow parent run)."""
    return await _change(store, cache, wake, experiment_id, service.resume)


@router.delete(
    "/experiments/{experiment_id}",
    status_code=204,
    responses={**NOT_FOUND, 409: {"model": Problem}, 502: {"model": Problem}},
    tags=["experiments"],
)
async def delete_experiment(
    experiment_id: ExperimentId,
    store: StoreDep,
    settings: SettingsDep,
    cache: ViewCacheDep,
    purge: Annotated[
        bool,
        Query(
            description="Also delete the sweep's Tune directory (trial results and "
            "checkpoints), its MLflow runs (to MLflow's trash) and the model versions "
            "registered from them (for good)."
        ),
    ] = False,
) -> Response:
    """Removes a finished sweep from the service (409 while it runs). Without `purge`,
    its Tune files and MLflow runs stay. With it they are deleted after the sweep left
    the store; 502 names what could not be deleted (remove it by hand)."""
    await run_in_threadpool(_get, store, experiment_id)
    try:
        rec = await run_in_threadpool(service.delete, store, experiment_id)
    except service.Conflict as err:
        raise _conflict(err) from None
    cache.invalidate(experiment_id)
    if purge:
        try:
            out = await in_fresh_process(
                purging.purge,
                rec.tune_path,
                settings.tune_storage,
                settings.tracking_uri,
                rec.mlflow,
                rec.id,
                timeout_s=600,
            )
        except Exception as err:  # noqa: BLE001 - timed out or the process died: a 502
            out = {"error": f"{type(err).__name__}: {err}"}
        if "error" in out:
            left = {"tune_path": rec.tune_path, "mlflow": rec.mlflow}
            raise HTTPException(
                502,
                detail=[
                    Issue(
                        loc="purge",
                        msg=f"sweep deleted, but purging failed: {out['error']}",
                        value=left,
                    ).model_dump(mode="json")
                ],
            )
    return Response(status_code=204)


@router.get("/cluster", response_model=ClusterView, tags=["service"])
def cluster(launcher: LauncherDep) -> ClusterView:
    """The Ray cluster's alive nodes with their CPUs, GPUs and custom resources: what
    a sweep's trials can be placed on (the same list `POST /experiments` checks)."""
    nodes = launcher.cluster()
    views = [
        NodeView(
            node_id=n["node_id"],
            node_ip=n["node_ip"],
            is_head=n["is_head"],
            cpus=n["resources"].get("CPU", 0.0),
            gpus=n["resources"].get("GPU", 0.0),
            resources={k: v for k, v in n["resources"].items() if not k.startswith("node:")},
        )
        for n in nodes or []
    ]
    views.sort(key=lambda v: (not v.is_head, v.node_ip or "", v.node_id))
    return ClusterView(
        ray_address=launcher.address,
        reachable=nodes is not None,
        nodes=views,
        cpus=sum(v.cpus for v in views),
        gpus=sum(v.gpus for v in views),
    )


@router.get("/algorithms", response_model=list[AlgorithmInfo], tags=["algorithms"])
def algorithms() -> list[AlgorithmInfo]:
    """Algorithms and presets: base algorithm, what each supports, its fixed settings,
    performance defaults and default search space (the registry, tuner/algorithms)."""
    return registry.algorithms()


_EXAMPLES = FilePath(tuner.__file__).resolve().parent.parent / "experiments"


@router.get("/examples", response_model=list[ExampleSpec], tags=["experiments"])
def examples() -> list[ExampleSpec]:
    """The example specs shipped with tuner (experiments/*.yaml), to start a new sweep
    from on the web page; empty where the package was installed without them."""
    if not _EXAMPLES.is_dir():
        return []
    out = []
    for path in sorted(_EXAMPLES.glob("*.yaml")):
        text = path.read_text()
        out.append(ExampleSpec(name=path.stem, spec=text, needs=_example_needs(text)))
    return out


def _example_needs(text: str) -> list[str]:
    """What an example spec needs of the service: the top-level packages of the code it
    names by import path (to allow with TUNER_ALLOWED_MODULES), and the earlier sweep a
    warm start reads."""
    from tuner.spec import import_paths, load_yaml_strict, parse_spec

    try:
        spec = parse_spec(load_yaml_strict(text))
    except Exception:  # noqa: BLE001 - the form's preview says what is wrong with it
        return []
    named = [*spec.callbacks, *import_paths(spec.config, spec.model, space=spec.search.space)]
    named += [p for p in (spec.module, spec.env) if p and ":" in p]
    if spec.custom_algorithm:
        named.append(spec.algorithm)
    packages = sorted({p.partition(":")[0].split(".")[0] for p in named})
    needs = [f"TUNER_ALLOWED_MODULES={','.join(packages)}"] if packages else []
    if spec.search.warm_start is not None:
        needs.append(f"an earlier sweep named {spec.search.warm_start.from_} (search.warm_start)")
    return needs


# `ids` as the schema declares it: a comma-separated list (OpenAPI's form style, not
# exploded) of 2 to compare.MOST distinct sweep ids, each of the store's form. Declared by
# hand: FastAPI would describe the one string it parses, with none of these rules.
_COMPARE_IDS = {
    "parameters": [
        {
            "name": "ids",
            "in": "query",
            "required": True,
            "style": "form",
            "explode": False,
            "description": f"2 to {compare.MOST} distinct sweep ids, comma-separated.",
            "schema": {
                "type": "array",
                "items": {"type": "string", "pattern": SWEEP_ID_PATTERN},
                "minItems": 2,
                "maxItems": compare.MOST,
                "uniqueItems": True,
            },
        }
    ]
}


@router.get(
    "/compare",
    response_model=Comparison,
    responses=NOT_FOUND,
    openapi_extra=_COMPARE_IDS,
    tags=["experiments"],
)
def compare_sweeps(
    store: StoreDep,
    ids: Annotated[str, Query(max_length=400, include_in_schema=False)],
) -> Comparison:
    """Sweeps side by side: each best config (the keys that differ named), its confirmed
    mean and CI, its best trial's learning curve, its importance and MLflow links."""
    wanted = [i.strip() for i in ids.split(",") if i.strip()]
    if not 2 <= len(wanted) <= compare.MOST or len(set(wanted)) != len(wanted):
        issue = Issue(
            loc="ids",
            value=ids,
            msg=f"give 2 to {compare.MOST} distinct sweep ids, comma-separated",
        )
        raise HTTPException(422, detail=[issue.model_dump(mode="json")])
    try:
        return compare.compare(store, wanted)
    except compare.UnknownSweep as err:
        raise HTTPException(404, detail=f"no sweep {err.args[0]!r}") from None
