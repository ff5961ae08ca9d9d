"""The OpenAPI document (/openapi.json): FastAPI's, plus what it cannot say by itself: the
spec's schema and its rules of single fields, our 422 shape, the answers of the routes'
guards and the links from a new sweep to its operations."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute
from starlette.routing import BaseRoute

from tuner.api._deps import get_store, require_token
from tuner.spec import IMPORT_PATH_RE, ExperimentSpec
from tuner.views import Problems


def _declare_problems(schema: dict, components: dict) -> None:
    """Every 422 is ours ({detail: [{loc, msg, value}]}, see _errors.request_problems), not
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
    refused: _errors.store_unavailable) where it reads the store."""
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


def openapi_builder(app: FastAPI, routes: list[BaseRoute]) -> Callable[[], dict]:
    """The app's `openapi` function: builds the document once, from FastAPI's, and keeps
    it. `routes` are every route of the app that answers HTTP methods (their guards are
    read from them)."""

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
        _declare_guard_answers(schema, routes)
        _link_sweep_operations(schema)
        app.openapi_schema = schema
        return schema

    return build
