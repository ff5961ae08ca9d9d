"""Every operation of the real server, fuzzed from its own OpenAPI schema (schemathesis):
no 5xx, responses match the schema, schema-invalid input refused, the Allow header right;
then its stateful phase follows the links from `POST /experiments` to the per-sweep
operations."""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis import checks

from tests.e2e.conftest import Server

pytestmark = pytest.mark.e2e

CHECKS = [
    checks.not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_schema_conformance,
    checks.response_headers_conformance,
    checks.negative_data_rejection,
    checks.unsupported_method,
    checks.allow_header_conformance if hasattr(checks, "allow_header_conformance") else None,
]
# positive_data_acceptance is left out on purpose: a spec the schema allows can still be
# refused by RLlib or the env (an unknown RLlib key, an unregistered gym id) - with a 422.


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    server = Server(
        tmp_path_factory.mktemp("schema") / "data",
        TUNER_MAX_TRIALS="4",
        TUNER_MAX_ACTIVE_SWEEPS="3",
        TUNER_CLUSTER_FIT_CHECK="false",
    ).start()
    yield server
    server.stop()
    server.stop_head()


def load(api: Server) -> schemathesis.BaseSchema:
    return schemathesis.openapi.from_url(f"{api.url}/openapi.json")


def test_every_operation_against_its_schema(api):
    schema = load(api)
    failures = []
    for result in schema.get_all_operations():
        operation = result.ok()

        @settings(
            max_examples=12,
            deadline=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
        )
        def run(case):  # noqa: ANN001
            case.call_and_validate(checks=[c for c in CHECKS if c], timeout=120)

        strategy = operation.as_strategy()
        try:
            from hypothesis import given

            given(strategy)(run)()
        except Exception as err:  # noqa: BLE001 - collect every operation's failure
            inner = getattr(err, "exceptions", None) or [err]
            failures.append(f"{operation.label}: " + "\n".join(str(e)[:3000] for e in inner))
    assert failures == [], "\n\n".join(failures)


def test_the_stateful_phase_reaches_the_sweep_operations(api):
    schema = load(api)
    links = schema.raw_schema["paths"]["/api/v1/experiments"]["post"]["responses"]["201"]
    assert {"GetExperiment", "ListTrials", "StopExperiment", "DeleteExperiment"} <= set(
        links["links"]
    )
    checks_run = [c for c in CHECKS if c]

    class Machine(schema.as_state_machine()):
        def get_call_kwargs(self, case):  # noqa: ANN001, ANN201
            return {"timeout": 120}

        def validate_response(self, response, case, additional_checks=None, **kwargs):  # noqa: ANN001, ANN201
            case.validate_response(
                response,
                checks=checks_run,
                transport_kwargs=kwargs or None,
                recorder=getattr(self, "recorder", None),
            )

    Machine.run(
        settings=settings(
            max_examples=8,
            stateful_step_count=4,
            deadline=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
        )
    )
