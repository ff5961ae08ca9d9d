"""What a purge may delete: only a sweep's own directory inside the Tune storage."""

from __future__ import annotations

import pytest

from tuner.purge import _under, purge, purge_tune_dir


@pytest.mark.parametrize(
    "path, root, inside",
    [
        ("/data/ray_results/abc", "/data/ray_results", True),
        ("/data/ray_results", "/data/ray_results", False),  # never the storage itself
        ("/data/ray_results/../mlflow.db", "/data/ray_results", False),
        ("/data/other/abc", "/data/ray_results", False),
        ("s3://bucket/tune/abc", "s3://bucket/tune", True),
        ("s3://bucket/tune", "s3://bucket/tune/", False),
        ("s3://bucket/tune/../x", "s3://bucket/tune", False),
        ("s3://bucket/tuneX/abc", "s3://bucket/tune", False),
    ],
)
def test_only_strictly_inside_the_storage(path, root, inside):
    assert _under(path, root) is inside


def test_purge_deletes_the_run_dir_and_nothing_beside_it(tmp_path):
    root = tmp_path / "ray_results"
    (root / "abc" / "trial" / "checkpoint_000000").mkdir(parents=True)
    (root / "other").mkdir()
    assert purge_tune_dir(str(root / "abc"), str(root))
    assert not (root / "abc").exists()
    assert (root / "other").is_dir()
    assert not purge_tune_dir(str(root / "abc"), str(root))  # already gone: no error
    with pytest.raises(ValueError, match="not inside"):
        purge_tune_dir(str(tmp_path), str(root))
    assert (root / "other").is_dir()


def test_purge_reports_failure_instead_of_raising(tmp_path):
    out = purge(str(tmp_path / "elsewhere"), str(tmp_path / "ray_results"), "", None, "x")
    assert "not inside" in out["error"]


def test_purge_deletes_the_sweeps_runs_and_model_versions_from_its_mlflow_links(tmp_path):
    """The links as the store keeps them (MlflowLinks dumped to JSON): the parent run, its
    trial runs and the versions registered from them go; another sweep's stay."""
    from mlflow.tracking import MlflowClient

    from tuner import mlflow_names as names
    from tuner.views import MlflowLinks

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri, registry_uri=uri)
    experiment = client.create_experiment("purged", artifact_location=str(tmp_path / "art"))

    def sweep(run_name: str) -> tuple[str, str]:
        parent = client.create_run(experiment, tags={names.TAG_RUN: run_name}).info.run_id
        child = client.create_run(
            experiment, tags={names.TAG_PARENT: parent, names.TAG_RUN: run_name}
        ).info.run_id
        return parent, child

    model = names.registered_model("purged")
    client.create_registered_model(model)
    parent, child = sweep("mine")
    mine = client.create_model_version(
        model, source=names.checkpoint_source(child, "checkpoint_000000"), run_id=child
    )
    other_parent, other_child = sweep("other")
    client.create_model_version(
        model, source=names.checkpoint_source(other_child, "c"), run_id=other_child
    )
    links = MlflowLinks(
        experiment_id=experiment,
        parent_run_id=parent,
        best_run_id=child,
        model_version=names.model_version_uri(model, mine.version),
    )
    out = purge(None, str(tmp_path / "ray_results"), uri, links.model_dump(mode="json"), "mine")
    assert out == {"tune_dir": False, "mlflow_runs": 2}
    assert {client.get_run(r).info.lifecycle_stage for r in (parent, child)} == {"deleted"}
    assert client.get_run(other_parent).info.lifecycle_stage == "active"
    assert [v.run_id for v in client.search_model_versions(f"name = '{model}'")] == [other_child]


def test_the_purge_loads_neither_ray_nor_mlflow_until_it_purges():
    """It runs in a fresh process of the API (no Ray there): its names and paths come
    from plain-string modules."""
    import subprocess
    import sys

    code = (
        "import sys, tuner.purge; "
        "print(sorted(m for m in ('ray', 'mlflow', 'pyarrow') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
