"""Sweeps side by side (GET /compare): thin, the work is in tuner.compare."""

from __future__ import annotations

from typing import Annotated

from fastapi import HTTPException, Query

from tuner import compare
from tuner.api._deps import StoreDep
from tuner.api._shared import NOT_FOUND, SWEEP_ID_PATTERN, guarded_router
from tuner.compare import Comparison
from tuner.views import Issue

router = guarded_router()

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
