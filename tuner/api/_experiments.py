"""Sweeps, the resource: submit (or plan), list, read, stop, resume, delete. Thin: the
work is in tuner.service and the store."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from fastapi import HTTPException, Query, Request, Response, status
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from tuner import purge as purging
from tuner import service
from tuner.api._cache import ViewCache
from tuner.api._deps import (
    LauncherDep,
    SettingsDep,
    StoreDep,
    ValidatorDep,
    ViewCacheDep,
    WakeDep,
)
from tuner.api._procs import in_fresh_process
from tuner.api._shared import NOT_FOUND, ExperimentId, guarded_router, sweep_or_404
from tuner.statuses import SweepStatus
from tuner.store import ExperimentRecord, Store
from tuner.views import ExperimentList, ExperimentView, Issue, Plan, Problem, Problems

router = guarded_router()


def experiment_view(store: Store, rec: ExperimentRecord) -> ExperimentView:
    """The public view of a stored sweep."""
    return ExperimentView.from_record(
        rec, store.trial_counts(rec.id), service.scheduler_in_force_of(rec.spec)
    )


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
        sweep_or_404(store, experiment_id)
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
        f"{experiment_id}/view",
        lambda: experiment_view(store, sweep_or_404(store, experiment_id)),
        state=_views_depend_on,
    )


def _views_depend_on(view: ExperimentView) -> tuple[object, ...]:
    """What of a sweep's view its trials and metrics views depend on: a change drops
    them, so a poll never pairs a STOPPED sweep with its trials from before the stop."""
    best = view.best.trial_id if view.best else None
    return (view.status, view.finished_at, best)


# stop and resume: 202 with the sweep's view, 404 for an unknown sweep, 409 where its
# status does not allow the change
_STATE_CHANGE: dict[str, Any] = {
    "response_model": ExperimentView,
    "status_code": 202,
    "responses": {**NOT_FOUND, 409: {"model": Problem}},
    "tags": ["experiments"],
}


@router.post("/experiments/{experiment_id}/stop", **_STATE_CHANGE)
async def stop_experiment(
    experiment_id: ExperimentId, store: StoreDep, cache: ViewCacheDep, wake: WakeDep
) -> ExperimentView:
    """Stops a sweep (STOPPING, then STOPPED): Tune saves its state and the trials end,
    resumable from their last checkpoint; a job that does not end within
    TUNER_STOP_TIMEOUT_S is stopped through Ray."""
    return await _change(store, cache, wake, experiment_id, service.request_stop)


@router.post("/experiments/{experiment_id}/resume", **_STATE_CHANGE)
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
    await run_in_threadpool(sweep_or_404, store, experiment_id)
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
