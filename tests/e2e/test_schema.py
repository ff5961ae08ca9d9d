"""Every operation of the real server, fuzzed from its own OpenAPI schema (schemathesis):
no 5xx, responses match the schema, schema-invalid input refused (negative data, so
`negative_data_rejection` has something to check), the Allow header right; then its
stateful phase follows the links from `POST /experiments` (which gets a 201 from the
schema's own example spec, a tiny CartPole PPO sweep) to the per-sweep operations.

Last, from outside: `schemathesis run` itself (every phase, every check, schema-valid
data accepted included) against the same server, as `make schemathesis` runs it: no
failure, and every operation reached with real data (sweeps made before the run give the
operations that read one their ids: tests/e2e/schemathesis_hooks.py)."""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode, checks

from tests.e2e.conftest import ROOT, Server, tiny, wait_for

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
# positive_data_acceptance is left out here: a spec the schema allows can still be refused
# by RLlib or the env (an unknown RLlib key, an unregistered gym id) - with a 422. The
# `schemathesis run` test below runs it, with that one allowance for POST /experiments.


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
    server.known = submit_known_sweeps(server)
    yield server
    server.stop()
    server.stop_head()


def submit_known_sweeps(server: Server) -> tuple[str, str]:
    """Two sweeps for `schemathesis run` to read, submitted before any test's (the first
    runs first): one tiny sweep that runs a trial, one stopped while queued."""
    one = {"method": "grid", "space": {"lr": {"grid": [1e-3]}}}
    with server.client() as c:
        ran = c.post("/experiments", json=tiny("schema-read", 1, search=one))
        other = c.post("/experiments", json=tiny("schema-other", 1, search=one))
        assert ran.status_code == other.status_code == 201, (ran.text, other.text)
        assert c.post(f"/experiments/{other.json()['id']}/stop").status_code == 202
    return ran.json()["id"], other.json()["id"]


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
    assert created, sorted(Counter(calls).items())
    assert per_sweep, sorted(Counter(calls).items())


CONFIG = Path(__file__).with_name("schemathesis.toml")
# Refusals of a positive spec for a rule of one field: each is in the schema (tuner/api/
# _openapi.py _declare_field_rules), so schema-valid data never meets one.
FIELD_RULES = re.compile(
    r"is not 'package\.module:Name'|is not a result key|listed twice|"
    r"a domain has exactly one of|domain without a kind"
)


def positive_refusals(ndjson: Path, label: str) -> list[dict]:
    """The problems ({loc, msg, value}) of every 422 that `label` gave schema-valid data."""
    found = []
    for line in ndjson.read_text().splitlines():
        scenario = json.loads(line).get("ScenarioFinished")
        if not scenario or scenario["recorder"]["label"] != label:
            continue
        recorder = scenario["recorder"]
        for case_id, node in recorder["cases"].items():
            meta = node["value"].get("meta") or {}
            response = (recorder.get("interactions", {}).get(case_id) or {}).get("response")
            if (meta.get("generation") or {}).get("mode") != "positive" or not response:
                continue
            if response["status_code"] == 422:
                content = response["content"]
                text = content.get("text") or base64.b64decode(content.get("$base64", "")).decode()
                found += json.loads(text)["detail"]
    return found


def test_schemathesis_run_finds_nothing_and_reaches_every_operation(api, tmp_path):
    """`schemathesis run` (tests/e2e/schemathesis.toml: examples, coverage, fuzzing and
    stateful phases, every check) exits 0: no failure (no schema-valid request refused,
    no undeclared status, no off-schema response, ...), and no operation answered 404 to
    every request (missing test data): each one answered a 2xx (or a 409, the sweep there
    but busy) at least once."""
    sweep, other = api.known
    with api.client() as c:
        wait_for(c, sweep, lambda v: v["status"] == "SUCCEEDED", timeout=600)
        trial = c.get(f"/experiments/{sweep}/trials").json()["items"][0]["trial_id"]
    reports = tmp_path / "reports"
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),  # the hooks module, tests.e2e.schemathesis_hooks
        "TUNER_SCHEMA_SWEEP": sweep,
        "TUNER_SCHEMA_TRIAL": trial,
        "TUNER_SCHEMA_OTHER_SWEEP": other,
    }
    run = subprocess.run(
        [
            str(Path(sys.executable).with_name("schemathesis")),
            *("--config-file", str(CONFIG), "--no-color", "run", f"{api.url}/openapi.json"),
            *("--report", "json,ndjson", "--report-dir", str(reports)),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    summary = json.loads(next(reports.glob("json-*.json")).read_text())
    said = run.stdout[-8000:] + run.stderr[-2000:]
    assert run.returncode == 0, said
    assert summary["complete"], said
    assert summary["failures"] == [], said
    assert summary["errors"] == [], said
    operations = {
        f"{method.upper()} {path}"
        for path, ops in load(api).raw_schema["paths"].items()
        for method in ops
    }
    assert summary["operations"]["tested"] == len(operations), summary["operations"]
    assert summary["warnings"]["missing_test_data"] == [], said
    reached = {
        label
        for label, phases in summary["valid_rates"].items()
        if any(p["accepted"] + p["conflicts"] for p in phases.values())
    }
    assert reached == operations, sorted(operations - reached)
    # the one allowance (schemathesis.toml): POST /experiments may refuse a spec of the
    # schema's shape, for what no schema can say - never for a rule of one field
    refused = positive_refusals(next(reports.glob("ndjson-*.ndjson")), "POST /api/v1/experiments")
    assert not [p for p in refused if FIELD_RULES.search(p["msg"])], refused
