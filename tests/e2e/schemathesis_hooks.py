"""schemathesis hooks for `schemathesis run` against a real `tuner serve`
(tests/e2e/schemathesis.toml names this module; tests/e2e/test_schema.py runs it).

The operations that read one sweep or one trial answer 404 to an id made up from the
schema's pattern, which is every id schemathesis can make: they get the ids of sweeps that
exist, made before the run (the test's setup), as examples of their parameters. The
examples phase sends them, so each of those operations is reached with real data.

    TUNER_SCHEMA_SWEEP        a finished sweep with a trial
    TUNER_SCHEMA_TRIAL        that trial's id
    TUNER_SCHEMA_OTHER_SWEEP  another sweep (for GET /compare)
"""

from __future__ import annotations

import os

import schemathesis

# operationId -> {parameter: the environment variable(s) holding its example}
_EXAMPLES = {
    "get_experiment": {"experiment_id": "TUNER_SCHEMA_SWEEP"},
    "list_trials": {"experiment_id": "TUNER_SCHEMA_SWEEP"},
    "metric_series": {"experiment_id": "TUNER_SCHEMA_SWEEP"},
    "trial_metrics": {"experiment_id": "TUNER_SCHEMA_SWEEP", "trial_id": "TUNER_SCHEMA_TRIAL"},
    "compare_sweeps": {"ids": ("TUNER_SCHEMA_SWEEP", "TUNER_SCHEMA_OTHER_SWEEP")},
}


def _value(names: str | tuple[str, ...]) -> object:
    if isinstance(names, tuple):
        return [os.environ[n] for n in names]
    return os.environ[names]


@schemathesis.hook
def before_load_schema(ctx, raw_schema: dict) -> None:  # noqa: ANN001
    """Real ids as examples of the id parameters (left as they are without the variables)."""
    if "TUNER_SCHEMA_SWEEP" not in os.environ:
        return
    for operations in raw_schema.get("paths", {}).values():
        for operation in operations.values():
            wanted = _EXAMPLES.get(operation.get("operationId"), {})
            for parameter in operation.get("parameters") or []:
                if parameter.get("name") in wanted:
                    value = _value(wanted[parameter["name"]])
                    parameter["examples"] = {"existing": {"value": value}}
