"""What the resource routers share: their prefix, guard and operation ids, a sweep's id
as a path parameter, and the 404 of an unknown sweep."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Path
from fastapi.routing import APIRoute

from tuner.api._deps import require_token
from tuner.store import ExperimentRecord, Store
from tuner.views import Problem

PREFIX = "/api/v1"


def operation_id(route: APIRoute) -> str:
    """A route's OpenAPI operationId: its function's name (create_experiment, ...)."""
    return route.name


def guarded_router() -> APIRouter:
    """A router under /api/v1 whose every route takes the token check (require_token)."""
    return APIRouter(
        prefix=PREFIX,
        dependencies=[Depends(require_token)],
        generate_unique_id_function=operation_id,
    )


def public_router() -> APIRouter:
    """A router under /api/v1 that anyone may call, with no token."""
    return APIRouter(prefix=PREFIX, generate_unique_id_function=operation_id)


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


def sweep_or_404(store: Store, experiment_id: str) -> ExperimentRecord:
    """The stored sweep, or a 404 naming the id."""
    rec = store.get_experiment(experiment_id)
    if rec is None:
        raise HTTPException(404, detail=f"no sweep {experiment_id!r}")
    return rec
