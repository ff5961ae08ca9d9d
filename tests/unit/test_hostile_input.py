"""A spec is data, and hostile input gets a 4xx naming the field: one test per finding
of the security review (issue "A spec is data"). Nothing here runs a sweep; the checks
are the ones `tuner validate`, `tuner run` and `POST /experiments` make."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from tuner.api import create_app
from tuner.cli import app as cli
from tuner.settings import Settings
from tuner.validation import Checks, check_body

BASE = {"name": "hostile", "algorithm": "DQN", "env": "CartPole-v1"}
POPEN = "{type: subprocess.Popen, _args: [[touch, probe-file]]}"


def worker_checks(allowed: list[str]) -> Checks:
    """What the API's validator worker checks (its limit on trials: 1000)."""
    return Checks(allowed_modules=allowed, import_user_code=False, max_trials=1000)


def post(spec: dict | str, *, yaml_body: bool = False, allowed: list[str] | None = None) -> dict:
    raw = spec.encode() if isinstance(spec, str) else json.dumps(spec).encode()
    return check_body(raw, yaml_body, worker_checks(allowed or []))


def locs(out: dict) -> list[str]:
    assert "spec" not in out, out
    return [i["loc"] for i in out["issues"]]


def test_a_replay_buffer_type_that_would_start_a_process_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = post({**BASE, "config": {"replay_buffer_config": {"type": POPEN}}})
    assert locs(out) == ["config.replay_buffer_config.type"]
    assert "PrioritizedEpisodeReplayBuffer" in out["issues"][0]["msg"]
    assert not (tmp_path / "probe-file").exists()
    spec = tmp_path / "spec.yaml"
    spec.write_text(json.dumps({**BASE, "config": {"replay_buffer_config": {"type": POPEN}}}))
    result = CliRunner().invoke(cli, ["validate", str(spec), "--no-env"])
    assert result.exit_code == 2
    assert "config.replay_buffer_config.type" in result.output
    assert not (tmp_path / "probe-file").exists()


@pytest.mark.parametrize("env", ["subprocess.Popen", "os.system", "tuner_examples.envs.Foo"])
def test_a_dotted_env_is_refused_rllib_would_import_it(env, tmp_path):
    """RLlib imports a dotted env name ('module.Class') and calls it with env_config."""
    out = post({**BASE, "env": env})
    assert locs(out) == ["env"]
    assert "RLlib imports a dotted env name" in out["issues"][0]["msg"]
    # not even under an allowed module: an import path is written 'module:Name'
    allowed = post({**BASE, "env": env}, allowed=["tuner_examples", "os", "subprocess"])
    assert locs(allowed) == ["env"]
    module, _, name = env.rpartition(".")
    assert f"'{module}:{name}'" in allowed["issues"][0]["msg"]
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({**BASE, "env": env}))
    result = CliRunner().invoke(cli, ["validate", str(spec), "--no-env", "--no-fit"])
    assert result.exit_code == 2
    assert "env" in result.output
    assert env in result.output


def test_an_import_path_env_needs_an_allowed_module_also_without_the_env_check(tmp_path):
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({**BASE, "env": "tuner_examples.envs:stateless_cartpole"}))
    refused = CliRunner().invoke(cli, ["validate", str(spec), "--no-env", "--no-fit"])
    assert refused.exit_code == 2
    assert "TUNER_ALLOWED_MODULES" in refused.output
    args = ["validate", str(spec), "--no-env", "--no-fit", "--allow-module", "tuner_examples"]
    allowed = CliRunner().invoke(cli, args)
    assert allowed.exit_code == 0, allowed.output


def test_rllib_short_names_pass():
    out = post({**BASE, "config": {"replay_buffer_config": {"type": "EpisodeReplayBuffer"}}})
    assert "spec" in out, out


@pytest.mark.parametrize(
    "key", ["extra_python_environs_for_worker", "extra_python_environs_for_driver"]
)
def test_environment_variables_for_trial_processes_are_refused(key):
    out = post({**BASE, "config": {key: {"LD_PRELOAD": "/tmp/evil.so"}}})
    assert locs(out) == [f"config.{key}"]
    assert "environment variables" in out["issues"][0]["msg"]


def test_callbacks_naming_a_stdlib_function_are_refused():
    out = post({**BASE, "config": {"callbacks": "os.abort"}})
    assert locs(out) == ["config.callbacks"]  # the spec's own `callbacks` field owns it
    assert "`callbacks`" in out["issues"][0]["msg"]
    out = post({**BASE, "callbacks": "os:abort"})
    assert locs(out) == ["callbacks.0"]
    assert "TUNER_ALLOWED_MODULES" in out["issues"][0]["msg"]


def test_the_validator_imports_no_module_a_spec_names(tmp_path, monkeypatch):
    probe = tmp_path / "mark"
    monkeypatch.setenv("TUNER_PROBE_FILE", str(probe))
    sys.modules.pop("tests.probe_import", None)
    refused = post({**BASE, "env": "tests.probe_import:ProbeEnv"})
    assert locs(refused) == ["env"]
    # even an allowed module is not imported by the validator (the driver builds the env)
    allowed = post({**BASE, "env": "tests.probe_import:ProbeEnv"}, allowed=["tests"])
    assert "spec" in allowed, allowed
    code = {"callbacks": "tests.probe_import:ProbeEnv", "module": "tests.probe_import:ProbeEnv"}
    assert locs(post({**BASE, **code})) == ["callbacks.0", "module"]
    callbacks = post({**BASE, **code}, allowed=["tests"])
    assert "spec" in callbacks, callbacks
    assert not probe.exists()
    assert "tests.probe_import" not in sys.modules


@pytest.mark.parametrize(
    ("space", "loc"),
    [
        ({"env": {"choice": ["this:CartPole-v1"]}}, "search.space.env"),
        ({"num_env_runners": {"choice": [64]}}, "search.space.num_env_runners"),
        ({"callbacks": {"choice": [None, "os.abort"]}}, "search.space.callbacks"),
        (
            {"replay_buffer_config": {"choice": [{"type": POPEN}]}},
            "search.space.replay_buffer_config.type",
        ),
    ],
)
def test_search_space_keys_get_the_checks_config_keys_get(space, loc):
    out = post({**BASE, "search": {"space": space}})
    assert loc in locs(out)


def test_yaml_tags_are_refused_not_decoded():
    body = "name: x\nalgorithm: PPO\nenv: CartPole-v1\nenv_config: {blob: !!binary aGVsbG8=}\n"
    out = post(body, yaml_body=True)
    assert locs(out) == ["(body)"]
    assert "!!binary" in out["issues"][0]["msg"]


def test_nan_in_config_is_refused_not_stored_as_null():
    out = post('{"name": "x", "algorithm": "PPO", "env": "CartPole-v1", "config": {"lr": NaN}}')
    assert locs(out) == ["config.lr"]


def test_a_name_with_a_trailing_newline_is_refused():
    out = post({**BASE, "name": "sweep\n"})
    assert locs(out) == ["name"]


def test_a_grid_of_a_million_points_is_refused():
    grid = {"grid": list(range(1000))}
    out = post({**BASE, "search": {"method": "grid", "space": {"lr": grid, "gamma": grid}}})
    assert locs(out) == ["search"]
    assert "1000000 trials" in out["issues"][0]["msg"]


def test_integers_beyond_64_bits_are_refused():
    out = post({**BASE, "config": {"train_batch_size_per_learner": 2**70}})
    assert locs(out) == ["config.train_batch_size_per_learner"]


def test_deeply_nested_bodies_are_413_quickly():
    out = check_body(b"[" * 100_000 + b"]" * 100_000, False, worker_checks([]))
    assert out["status"] == 413
    deep_yaml = ("a:\n" + "".join("  " * i + "b:\n" for i in range(1, 60))).encode()
    assert check_body(deep_yaml, True, worker_checks([]))["status"] == 413


@pytest.fixture
def client(tmp_path):
    return TestClient(create_app(Settings(data_dir=tmp_path)), base_url="http://127.0.0.1:8000")


def test_a_foreign_host_header_is_refused(client):
    assert client.get("/", headers={"Host": "evil.example"}).status_code == 400
    assert client.get("/").status_code == 200


def test_every_response_carries_the_browser_hardening_headers(client):
    for response in (client.get("/"), client.get("/api/v1/algorithms"), client.get("/nope")):
        headers = response.headers
        assert "script-src 'self'" in headers["content-security-policy"]
        directives = dict(d.split(" ", 1) for d in headers["content-security-policy"].split("; "))
        assert "unsafe-inline" not in directives["script-src"]
        assert headers["x-frame-options"] == "DENY"
        assert headers["x-content-type-options"] == "nosniff"
        assert headers["referrer-policy"]


def test_the_old_setting_name_still_allows_modules(monkeypatch):
    monkeypatch.setenv("TUNER_ENV_MODULES", "mypkg")
    assert Settings().allowed_module_list == ["mypkg"]
    monkeypatch.setenv("TUNER_ALLOWED_MODULES", "a, b.c")
    assert Settings().allowed_module_list == ["a", "b.c"]


def test_probe_module_really_marks_an_import(tmp_path, monkeypatch):
    """The probe above could only fail to notice an import if importing it did nothing."""
    probe = tmp_path / "mark"
    monkeypatch.setenv("TUNER_PROBE_FILE", str(probe))
    sys.modules.pop("tests.probe_import", None)
    __import__("tests.probe_import")
    assert probe.read_text() == "imported"
    sys.modules.pop("tests.probe_import", None)
    os.environ.pop("TUNER_PROBE_FILE", None)
    assert Path(probe).exists()


def test_code_fields_outside_the_allowed_modules_get_422_naming_the_field():
    own = {"name": "x", "algorithm": "os:system", "metric": "loss"}
    assert locs(post(own)) == ["algorithm"]
    assert locs(post({**own, "algorithm": "tuner_examples.trainables:reinforce"})) == ["algorithm"]
    allowed = post(
        {**own, "algorithm": "tuner_examples.trainables:reinforce"}, allowed=["tuner_examples"]
    )
    assert "spec" in allowed, allowed


# ---------------------------------------------------------------- the same, over HTTP
# POST /api/v1/experiments on the real app (routes, middleware, store, the validator
# worker process; no Ray): the status, the field named, nothing stored, nothing launched.

JSON = {"content-type": "application/json"}
YAML = {"content-type": "application/yaml"}


def _body(spec: dict | str | bytes) -> bytes:
    if isinstance(spec, bytes):
        return spec
    return spec.encode() if isinstance(spec, str) else json.dumps(spec).encode()


HOSTILE = [
    (
        "popen-buffer",
        {**BASE, "config": {"replay_buffer_config": {"type": POPEN}}},
        JSON,
        422,
        "config.replay_buffer_config.type",
    ),
    (
        "config-callbacks",
        {**BASE, "config": {"callbacks": "os.abort"}},
        JSON,
        422,
        "config.callbacks",
    ),
    ("callbacks", {**BASE, "callbacks": "os:abort"}, JSON, 422, "callbacks.0"),
    ("module", {**BASE, "module": "os:system"}, JSON, 422, "module"),
    ("own-loop", {"name": "x", "algorithm": "os:system", "metric": "loss"}, JSON, 422, "algorithm"),
    ("env-path", {**BASE, "env": "tests.probe_import:ProbeEnv"}, JSON, 422, "env"),
    ("dotted-env", {**BASE, "env": "subprocess.Popen"}, JSON, 422, "env"),
    (
        "env-vars",
        {**BASE, "config": {"extra_python_environs_for_worker": {"LD_PRELOAD": "x"}}},
        JSON,
        422,
        "config.extra_python_environs_for_worker",
    ),
    (
        "space-env",
        {**BASE, "search": {"space": {"env": {"choice": ["this:CartPole-v1"]}}}},
        JSON,
        422,
        "search.space.env",
    ),
    (
        "space-runners",
        {**BASE, "search": {"space": {"num_env_runners": {"choice": [64]}}}},
        JSON,
        422,
        "search.space.num_env_runners",
    ),
    (
        "space-callbacks",
        {**BASE, "search": {"space": {"callbacks": {"choice": [None, "os.abort"]}}}},
        JSON,
        422,
        "search.space.callbacks",
    ),
    (
        "space-buffer",
        {**BASE, "search": {"space": {"replay_buffer_config": {"choice": [{"type": POPEN}]}}}},
        JSON,
        422,
        "search.space.replay_buffer_config.type",
    ),
    (
        "yaml-tag",
        "name: x\nalgorithm: PPO\nenv: CartPole-v1\nenv_config: {blob: !!binary aGVsbG8=}\n",
        YAML,
        422,
        "(body)",
    ),
    (
        "nan",
        '{"name": "x", "algorithm": "PPO", "env": "CartPole-v1", "config": {"lr": NaN}}',
        JSON,
        422,
        "config.lr",
    ),
    ("name-newline", {**BASE, "name": "sweep\n"}, JSON, 422, "name"),
    (
        "million-grid",
        {
            **BASE,
            "search": {
                "method": "grid",
                "space": {"lr": {"grid": list(range(1000))}, "gamma": {"grid": list(range(1000))}},
            },
        },
        JSON,
        422,
        "search",
    ),
    (
        "int-beyond-64-bits",
        {**BASE, "config": {"train_batch_size_per_learner": 2**70}},
        JSON,
        422,
        "config.train_batch_size_per_learner",
    ),
    ("deep-json", b"[" * 100_000 + b"]" * 100_000, JSON, 413, "(body)"),
    (
        "deep-yaml",
        ("a:\n" + "".join("  " * i + "b:\n" for i in range(1, 60))).encode(),
        YAML,
        413,
        "(body)",
    ),
    ("deep-yaml-flow", b"[" * 100_000 + b"]" * 100_000, YAML, 413, "(body)"),
    ("too-large", b" " * 2_000_000, JSON, 413, "(body)"),
]


@pytest.mark.parametrize(
    ("spec", "headers", "status", "loc"),
    [case[1:] for case in HOSTILE],
    ids=[case[0] for case in HOSTILE],
)
def test_hostile_input_over_http_is_refused_naming_the_field(
    service_app, validator_probe_file, tmp_path, spec, headers, status, loc
):
    app = service_app()
    client = TestClient(app, base_url="http://127.0.0.1")
    raw = _body(spec).replace(b"probe-file", str(tmp_path / "probe-file").encode())
    r = client.post("/api/v1/experiments", content=raw, headers=headers)
    assert r.status_code == status, r.text
    assert loc in [p["loc"] for p in r.json()["detail"]], r.json()
    assert all(set(p) == {"loc", "msg", "value"} for p in r.json()["detail"])
    assert client.get("/api/v1/experiments").json()["total"] == 0  # nothing stored
    assert app.state.launcher.submitted == []  # nothing launched
    assert not (tmp_path / "probe-file").exists()  # nothing executed
    assert not validator_probe_file.exists()  # nothing imported by the validator


def test_the_validator_over_http_imports_no_allowed_module_either(
    service_app, validator_probe_file
):
    """An allowed import-path env is accepted as text; the driver builds it, not the API."""
    app = service_app(allowed_modules="tests")
    client = TestClient(app, base_url="http://127.0.0.1")
    spec = {**BASE, "env": "tests.probe_import:ProbeEnv", "callbacks": "tests.probe_import:X"}
    r = client.post("/api/v1/experiments", json=spec)
    assert r.status_code == 201, r.text
    assert client.get("/api/v1/experiments").json()["total"] == 1
    assert not validator_probe_file.exists()
    assert "tests.probe_import" not in sys.modules
