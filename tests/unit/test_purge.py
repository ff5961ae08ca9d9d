"""What a purge may delete: only a sweep's own directory inside the Tune storage."""

from __future__ import annotations

import pytest

from tuner._purge import _under, purge, purge_tune_dir


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
    assert not (root / "abc").exists() and (root / "other").is_dir()
    assert not purge_tune_dir(str(root / "abc"), str(root))  # already gone: no error
    with pytest.raises(ValueError, match="not inside"):
        purge_tune_dir(str(tmp_path), str(root))
    assert (root / "other").is_dir()


def test_purge_reports_failure_instead_of_raising(tmp_path):
    out = purge(str(tmp_path / "elsewhere"), str(tmp_path / "ray_results"), "", None, "x")
    assert "not inside" in out["error"]
