"""The REST API and the web page. Routes never import Ray; sweeps run as Ray Jobs.

- `_app.py`: create_app, the assembly (routers, middleware, error answers, the page,
  the lifespan)
- one router per resource, thin over tuner.service and the store: `_experiments.py`
  (sweeps), `_trials.py` (trials and metrics), `_compare.py`, `_service.py` (liveness,
  statuses, cluster, algorithms, examples); `_shared.py` what they share
- `_deps.py` what routes are given; `_cache.py` the polled views; `_validator.py` the
  spec-checking worker; `_procs.py` work in a fresh process
- `_body_limit.py`, `_security.py`, `_errors.py`: request size, browser hardening, the
  answers given before or instead of a route's; `_openapi.py` the OpenAPI document
"""

from tuner.api._app import create_app

__all__ = ["create_app"]
