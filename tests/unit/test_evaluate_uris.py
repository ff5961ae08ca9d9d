"""`tuner evaluate` on what it is pointed at, before any policy is restored: models:/
URIs by version, `latest` and @alias against a real SQLite registry (whose versions point
at dummy sources), a registry or directory that is not there, and the one RLlib warning
a restore logs. No training: the checkpoints here are never played."""

from __future__ import annotations

import logging
import traceback

import pytest
from typer.testing import CliRunner

from tuner import mlflow_names
from tuner.cli import app
from tuner.rllib import NoTrackingStore
from tuner.rllib._evaluate import (
    RLMODULE_CONFIG_DEPRECATION,
    _quiet_rlmodule_config_deprecation,
    resolve_checkpoint,
)

MODEL = "dqn-cartpole-best"


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    """A data dir whose MLflow store has MODEL with versions 1 and 2 (each source a folder
    holding a file that names its version) and the alias @champion on version 1, so that
    `latest` and the alias name different versions."""
    from mlflow.tracking import MlflowClient

    data = tmp_path_factory.mktemp("data")
    uri = f"sqlite:///{data / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri, registry_uri=uri)
    client.create_registered_model(MODEL)
    for n in (1, 2):
        source = data / f"source{n}"
        source.mkdir()
        (source / "version.txt").write_text(str(n))
        client.create_model_version(MODEL, source=str(source))
    client.set_registered_model_alias(MODEL, "champion", "1")
    return data, uri


def evaluate(*args: str, **env: str | None):
    """`tuner evaluate ARGS` in this process, TUNER_* of the environment unset but `env`."""
    unset = {"TUNER_DATA_DIR": None, "TUNER_MLFLOW_TRACKING_URI": None}
    return CliRunner().invoke(app, ["evaluate", *args], env={**unset, **env})


def refused_in_one_line(result, *words: str) -> str:
    """The one output line of a refusal (exit 2, no traceback) that holds every word."""
    shown = "".join(traceback.format_exception(result.exc_info[1])) if result.exc_info else ""
    assert result.exit_code == 2, result.output + shown
    assert isinstance(result.exception, SystemExit), shown
    assert "Traceback" not in result.output
    lines = [ln for ln in result.output.splitlines() if all(w in ln for w in words)]
    assert len(lines) == 1, result.output
    return lines[0]


def test_latest_is_the_newest_version_and_an_alias_its_version(registry, tmp_path):
    data, uri = registry
    for uri_form, version in (
        (f"models:/{MODEL}/latest", "2"),
        (f"models:/{MODEL}@champion", "1"),
        (f"models:/{MODEL}/2", "2"),
    ):
        local = resolve_checkpoint(uri_form, uri, tmp_path / version / uri_form[-3:])
        assert (local / "version.txt").read_text() == version, uri_form


def test_a_version_that_is_not_there_names_the_versions_there(registry):
    data, _ = registry
    line = refused_in_one_line(
        evaluate(f"models:/{MODEL}/99", "--data-dir", str(data)), f"models:/{MODEL}/99"
    )
    assert f"no model version {MODEL}/99" in line
    assert f"{MODEL} has versions 1, 2" in line
    assert "@champion (version 1)" in line


def test_latest_of_a_model_that_is_not_there_names_the_models_there(registry):
    data, _ = registry
    line = refused_in_one_line(
        evaluate("models:/nope-best/latest", "--data-dir", str(data)), "models:/nope-best/latest"
    )
    assert f"registered models: {MODEL}" in line


def test_an_alias_that_is_not_there_names_the_aliases_there(registry):
    data, _ = registry
    line = refused_in_one_line(
        evaluate(f"models:/{MODEL}@nope", "--data-dir", str(data)), f"models:/{MODEL}@nope"
    )
    assert f"no alias @nope of model {MODEL}" in line
    assert "aliases @champion (version 1)" in line


def test_a_version_that_is_no_number_says_what_is_accepted(registry):
    data, _ = registry
    line = refused_in_one_line(
        evaluate(f"models:/{MODEL}/Production", "--data-dir", str(data)), "'Production'"
    )
    assert f"models:/{MODEL}/latest" in line
    assert f"models:/{MODEL}@<alias>" in line


def test_a_checkpoint_directory_that_is_not_there_is_named(tmp_path):
    missing = tmp_path / "no-such-checkpoint"
    line = refused_in_one_line(evaluate(str(missing)), str(missing))
    assert f"no such directory: {missing}" in line
    with pytest.raises(FileNotFoundError, match="no such directory: file://"):
        resolve_checkpoint(missing.as_uri(), None, tmp_path / "dest")


def test_a_tracking_store_that_is_not_there_is_named_and_not_created(tmp_path):
    """The default store (TUNER_DATA_DIR's, here a dir that does not exist) is read, not
    made: MLflow would create an empty mlflow.db to answer."""
    data = tmp_path / "never-run"
    for uri in ("models:/cartpole-best/1", "models:/cartpole-best/latest", "runs:/abc/ckpt"):
        line = refused_in_one_line(evaluate(uri, TUNER_DATA_DIR=str(data)), uri)
        assert f"no MLflow tracking store at {data / 'mlflow.db'}" in line
        assert "TUNER_DATA_DIR" in line
        assert "TUNER_MLFLOW_TRACKING_URI" in line
    assert not data.exists()
    store = tmp_path / "elsewhere.db"
    with pytest.raises(NoTrackingStore, match=str(store)):
        resolve_checkpoint("models:/cartpole-best/1", f"sqlite:///{store}", tmp_path / "dest")
    assert not store.exists()


def test_alias_uris_are_parsed_apart_from_version_uris():
    assert mlflow_names.parse_model_alias_uri(f"models:/{MODEL}@champion") == (MODEL, "champion")
    assert mlflow_names.parse_model_version_uri(f"models:/{MODEL}@champion") is None
    assert mlflow_names.parse_model_version_uri(f"models:/{MODEL}/latest") == (MODEL, "latest")
    assert mlflow_names.parse_model_alias_uri(f"models:/{MODEL}/3") is None
    assert mlflow_names.parse_model_alias_uri("runs:/abc@x") is None


def test_only_rllibs_rlmodule_config_deprecation_is_quieted(caplog):
    """RLlib logs it on every restore (RLModule.__init__ builds the deprecated config
    itself); other deprecations, and that logger outside the restore, still show."""
    from ray.rllib.utils import deprecation_warning

    name = logging.getLogger(deprecation_warning.__module__).name
    rlmodule = f"DeprecationWarning: {RLMODULE_CONFIG_DEPRECATION}. Use `RLModule(...)` instead."
    other = "DeprecationWarning: `something_else` has been deprecated."
    with caplog.at_level(logging.WARNING, logger=name):
        with _quiet_rlmodule_config_deprecation():
            logging.getLogger(name).warning(rlmodule)
            logging.getLogger(name).warning(other)
        logging.getLogger(name).warning(rlmodule)
    assert [r.getMessage() for r in caplog.records] == [other, rlmodule]
