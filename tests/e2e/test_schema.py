"""Every operation of the real server, fuzzed from its own OpenAPI schema (schemathesis):
no 5xx, responses match the schema, schema-invalid input refused (negative data, so
`negative_data_rejection` has something to check), the Allow header right; then its
stateful phase follows the links from `POST /experiments` (which gets a 201 from the
schema's own example spec, a tiny CartPole PPO sweep) to the per-sweep operations."""

from __future__ import annotations

from collections import Counter

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode, checks

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
        # roomy: a POST of the schema's example is a 201 in every scenario the stateful
        # phase replays (a 429 once earlier ones piled up empties its bundle of sweep ids:
        # Hypothesis's FlakyStrategyDefinition); tests/unit/test_races_and_limits.py has 429
        TUNER_MAX_ACTIVE_SWEEPS="500",
        TUNER_CLUSTER_FIT_CHECK="false",
        # the example spec's sweeps really run: one at a time, and a stop is enforced soon
        TUNER_MAX_RUNNING_EXPERIMENTS="1",
        TUNER_STOP_TIMEOUT_S="10",
    ).start()
    yield server
    server.stop()
    server.stop_head()


def load(api: Server) -> schemathesis.BaseSchema:
    return schemathesis.openapi.from_url(f"{api.url}/openapi.json")


# Examples per operation and mode: positive data must never be a 5xx or off-schema;
# negative data (what the schema forbids) must be refused with a 4xx.
EXAMPLES = {GenerationMode.POSITIVE: 12, GenerationMode.NEGATIVE: 8}


def _negatable(operation) -> bool:  # noqa: ANN001
    """Whether the operation takes something negative data can break: a body, a query,
    headers or cookies (a path parameter that may be any string has no invalid value)."""
    parts = (operation.query, operation.headers, operation.cookies)
    return any(len(p) for p in parts) or bool(operation.body)


def test_every_operation_against_its_schema(api):
    schema = load(api)
    failures: list[str] = []
    negative: list[str] = []
    for result in schema.get_all_operations():
        operation = result.ok()
        for mode, examples in EXAMPLES.items():
            if mode == GenerationMode.NEGATIVE and not _negatable(operation):
                continue  # nothing to break: no parameters, or only free-form path strings

            @settings(
                max_examples=examples,
                deadline=None,
                derandomize=True,
                suppress_health_check=list(HealthCheck),
            )
            def run(case):  # noqa: ANN001
                case.call_and_validate(checks=[c for c in CHECKS if c], timeout=120)

            try:
                given(operation.as_strategy(generation_mode=mode))(run)()
                if mode == GenerationMode.NEGATIVE:
                    negative.append(operation.label)
            except Unsatisfiable:  # a body or query with no invalid value: a loose schema
                failures.append(f"{operation.label}: no negative data could be made")
            except Exception as err:  # noqa: BLE001 - collect every operation's failure
                inner = getattr(err, "exceptions", None) or [err]
                failures.append(
                    f"{operation.label} ({mode.value}): " + "\n".join(str(e)[:3000] for e in inner)
                )
    assert failures == [], "\n\n".join(failures)
    assert {"POST /api/v1/experiments", "GET /api/v1/experiments"} <= set(negative), negative
    assert len(negative) >= 5, negative


def test_the_stateful_phase_reaches_the_sweep_operations(api):
    schema = load(api)
    post = schema.raw_schema["paths"]["/api/v1/experiments"]["post"]
    links = post["responses"]["201"]
    assert {"GetExperiment", "ListTrials", "StopExperiment", "DeleteExperiment"} <= set(
        links["links"]
    )
    assert post["requestBody"]["content"]["application/json"]["examples"]
    checks_run = [c for c in CHECKS if c]
    calls: list[tuple[str, str, int]] = []
    # Only the schema's own links (POST 201 -> the sweep's operations): links schemathesis
    # infers feed ids from responses that change as sweeps run (a list of sweeps, a sweep's
    # trials), and Hypothesis takes a replayed scenario that draws differently for a
    # flaky test (FlakyStrategyDefinition).
    schema.config.phases.stateful.inference.algorithms = []

    class Machine(schema.as_state_machine()):
        def before_call(self, case):  # noqa: ANN001, ANN201
            # this phase is about the links a new sweep opens: its POSTs store a sweep
            # (dry_run, which stores nothing, is fuzzed by the test above)
            if case.operation.path == "/api/v1/experiments" and case.query:
                case.query.pop("dry_run", None)

        def get_call_kwargs(self, case):  # noqa: ANN001, ANN201
            return {"timeout": 120}

        def validate_response(self, response, case, additional_checks=None, **kwargs):  # noqa: ANN001, ANN201
            calls.append((case.method.upper(), case.operation.path, response.status_code))
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
    created = [c for c in calls if c[:2] == ("POST", "/api/v1/experiments") and c[2] == 201]
    per_sweep = [c for c in calls if c[1].startswith("/api/v1/experiments/{") and 200 <= c[2] < 300]
    assert created and per_sweep, sorted(Counter(calls).items())
