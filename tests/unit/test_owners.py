"""One owner per concept: the algorithm list, the MLflow names and the public views are
each defined in one module, and every layer uses that one."""

from __future__ import annotations

import ast
import typing
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from pydantic import BaseModel

import tuner
from tests.source import strings
from tuner import algorithms as registry
from tuner import mlflow_names, tune_paths
from tuner.api import create_app
from tuner.settings import Settings
from tuner.spec import ExperimentSpec
from tuner.store import Store

PACKAGE = Path(tuner.__file__).parent


def string_constants(path: Path) -> set[str]:
    return set(strings(ast.parse(path.read_text())))


# (module, value): where a word that is also one of our MLflow names means something else
NOT_THE_NAME = {
    ("spec/_models.py", "search"): "the spec's search section",
    ("cli/_remote.py", "search"): "the spec's search section",
    ("validation/_issues.py", "search"): "the spec's search section, as a loc",
    ("cli/_remote.py", "trial"): "a table column",
    ("sweep/_progress.py", "trial"): "a table column",
    ("spec/_sections.py", "training_iteration"): "the spec's own stop key and time_attr value",
    ("spec/_scheduler_section.py", "training_iteration"): "a time_attr value of the spec's schema",
    (
        "spec/_scheduler_section.py",
        "num_env_steps_sampled_lifetime",
    ): "a time_attr value of the spec's schema",
    ("validation/_limits.py", "search"): "the spec's search section, as a loc",
    (
        "spec/_sections.py",
        "num_env_steps_sampled_lifetime",
    ): "a time_attr value of the spec's schema",
    ("store/migrations/versions/0002_confirmation.py", "search"): "a migration never changes",
    ("api/_experiments.py", "search"): "the OpenAPI example spec's search section",
    ("api/_experiments.py", "training_iteration"): "the OpenAPI example spec's stop key",
}


def spec_fields(model: type = ExperimentSpec, prefix: str = "") -> set[str]:
    """Every field path of the spec: algorithm, search, search.method, ..."""
    out = set()
    for name, field in model.model_fields.items():
        out.add(prefix + name)
        for arg in (field.annotation, *typing.get_args(field.annotation)):
            if isinstance(arg, type) and issubclass(arg, BaseModel):
                out |= spec_fields(arg, f"{prefix}{name}.")
    return out


@pytest.mark.parametrize("owner", [mlflow_names, tune_paths], ids=lambda m: m.__name__)
def test_names_are_spelled_only_in_their_module(owner):
    """Every string constant of mlflow_names (tags, stages, metric keys, artifacts, URI
    schemes, ...) and tune_paths appears as a literal in no other module of tuner/."""
    constants = {k: v for k, v in vars(owner).items() if k.isupper() and isinstance(v, str)}
    # params named after the spec's fields ("algorithm", "seed", ...) are the spec's words
    params = {
        k: v
        for k, v in constants.items()
        if k.startswith("PARAM_") and not v.startswith(mlflow_names.BEST_PREFIX)
    }
    assert set(params.values()) <= spec_fields(), "a PARAM_ that is no spec field"
    names = {v for k, v in constants.items() if k not in params}
    if owner is mlflow_names:
        assert {"tuner.run", "mlflow.parentRunId", "best_config.json", "search", "confirm"} <= names
        assert {"models:/", mlflow_names.STEP_KEY, mlflow_names.ITERATION_KEY} <= names
    else:
        assert "-confirm" in names
    offenders = {}
    for path in PACKAGE.rglob("*.py"):
        module = str(path.relative_to(PACKAGE))
        if path.stem == owner.__name__.rsplit(".", 1)[-1]:
            continue
        spelled = {v for v in string_constants(path) & names if (module, v) not in NOT_THE_NAME}
        if spelled:
            offenders[module] = sorted(spelled)
    assert offenders == {}


def test_model_version_uris_are_built_and_parsed_by_one_pair():
    uri = mlflow_names.model_version_uri("sweep-best", 3)
    assert uri == "models:/sweep-best/3"
    assert mlflow_names.parse_model_version_uri(uri) == ("sweep-best", "3")
    assert mlflow_names.parse_model_version_uri("models:/sweep-best") == ("sweep-best", None)
    assert mlflow_names.parse_model_version_uri("runs:/abc/checkpoints/x") is None
    assert mlflow_names.checkpoint_source("abc", "checkpoint_000001") == (
        "runs:/abc/checkpoints/checkpoint_000001"
    )


def test_the_spec_accepts_exactly_the_registry_names():
    schema = ExperimentSpec.model_json_schema()["properties"]["algorithm"]
    names, import_path = schema["anyOf"]
    assert set(names["enum"]) == set(registry.names())  # and an import path for your own
    for name in registry.names():
        assert ExperimentSpec(name="x", algorithm=name, env="CartPole-v1").algorithm == name
    with pytest.raises(ValueError, match="is not an algorithm"):
        ExperimentSpec(name="x", algorithm="PPO2", env="CartPole-v1")
    assert "pattern" in import_path
    assert set(registry.base_algorithms()) == {"PPO", "APPO", "IMPALA", "DQN", "SAC"}
    for name in registry.presets():
        entry = registry.get(name)
        assert entry.base_algorithm in registry.base_algorithms()
        assert entry.preset_config, name
        spec = ExperimentSpec(name="x", algorithm=name, env="CartPole-v1")
        assert spec.base_algorithm == entry.base_algorithm


def test_every_entry_has_a_default_space_and_what_it_supports():
    for entry in registry.algorithms():
        assert entry.default_space, entry.name
        assert entry.space_source, entry.name
        assert set(entry.actions) <= {"discrete", "continuous"}
        assert entry.actions
    assert registry.get("DQN").actions == ["discrete"]
    assert registry.get("SAC").actions == ["continuous"]
    with pytest.raises(KeyError, match="known: PPO"):
        registry.get("A2C")


def test_every_base_algorithm_has_a_trainable():
    from tuner.rllib import TRAINABLES

    assert set(TRAINABLES) == set(registry.base_algorithms())


def test_no_other_module_lists_the_algorithms():
    import tuner.rllib as trainables

    # the registry's presets() is the only list of presets (the driver's copy is gone)
    assert not hasattr(trainables, "presets")
    assert "presets" not in trainables.__all__
    needle = {"Rainbow_DQN", "Noisy_DQN"}
    offenders = [
        str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py") if string_constants(p) & needle
    ]
    assert offenders == []


def test_view_models_are_defined_once():
    defined: dict[str, list[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                defined.setdefault(node.name, []).append(str(path.relative_to(PACKAGE)))
    homes = {
        "TrialView": "views/_trials.py",
        "BestTrial": "views/_answer.py",
        "MlflowLinks": "views/_sweeps.py",
        "ExperimentView": "views/_sweeps.py",
        "MetricPoint": "views/_trials.py",
        "Issue": "views/_problems.py",
    }
    for view, home in homes.items():
        assert defined[view] == [home], (view, defined[view])
    for gone in (
        "TrialOut",
        "TrialRecord",
        "BestView",
        "MlflowView",
        "MetricPointOut",
        "SpecIssue",
    ):
        assert gone not in defined


def test_a_problem_has_one_shape():
    """{loc, msg, value}: `views.Issue`, which a SpecError carries and every 422 lists;
    no module spells it again as a dict."""
    from tuner import spec, views

    assert spec.SpecIssue is views.Issue
    assert spec.SpecError.one("a.b", "bad", 3).issues[0] == views.Issue(
        loc="a.b", msg="bad", value=3
    )
    raw = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            keys = {k.value for k in getattr(node, "keys", []) if isinstance(k, ast.Constant)}
            if isinstance(node, ast.Dict) and {"loc", "msg"} <= keys:
                raw.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert raw == []


@pytest.fixture
def client(tmp_path):
    app = create_app(Settings(data_dir=tmp_path))
    app.state.store = Store(f"sqlite:///{tmp_path / 'tuner.db'}")
    yield TestClient(app, base_url="http://127.0.0.1")  # no lifespan: only the store needed
    app.state.store.close()


def test_algorithms_route_serves_the_registry(client):
    body = client.get("/api/v1/algorithms").json()
    assert [a["name"] for a in body] == list(registry.names())
    rainbow = next(a for a in body if a["name"] == "Rainbow_DQN")
    assert rainbow["base_algorithm"] == "DQN"
    assert rainbow["preset_config"]["n_step"] == 3
    dqn_space = registry.get("DQN").default_space
    assert rainbow["default_space"] == {
        k: v for k, v in dqn_space.items() if k not in rainbow["preset_config"]
    }
    starts = "num_steps_sampled_before_learning_starts"
    assert starts in dqn_space
    assert starts not in rainbow["default_space"]
    assert {"actions", "gpu_learner", "lstm", "performance_defaults"} <= set(rainbow)


@pytest.mark.parametrize(
    ("query", "loc", "value"),
    [("limit=0", "limit", "0"), ("limit=abc", "limit", "abc"), ("offset=-1", "offset", "-1")],
)
def test_query_problems_have_the_body_problems_shape(client, query, loc, value):
    response = client.get(f"/api/v1/experiments?{query}")
    assert response.status_code == 422
    [problem] = response.json()["detail"]
    assert problem["loc"] == loc
    assert problem["value"] == value
    assert problem["msg"]


def test_only_public_ray_apis():
    """No module of tuner/, tests/ or bench/ reaches into Ray's private API: the Jobs
    client's `_do_request`, `ray._private`, `ray._raylet`."""
    root = PACKAGE.parent
    offenders = []
    for path in [p for d in ("tuner", "tests", "bench") for p in (root / d).rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            modules = []
            if isinstance(node, ast.Import):
                modules = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                modules = [node.module or ""]
            private = any(m.startswith("ray._") for m in modules) or (
                isinstance(node, ast.Attribute)
                and node.attr in ("_do_request", "_private", "_raylet")
            )
            if private:
                offenders.append(f"{path.relative_to(root)}:{node.lineno}")
    assert offenders == []
