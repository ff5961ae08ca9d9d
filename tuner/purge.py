"""Removes what a sweep left outside the store: its Tune run directory and its MLflow
runs and registered model versions (`DELETE /experiments/{id}?purge=true`).

Runs in the API's worker process (MLflow and pyarrow are loaded there, never in the
API process). MLflow runs are deleted the way the MLflow UI deletes them (lifecycle
`deleted`, files kept until `mlflow gc`), so a purge by mistake can still be undone
there.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from tuner.mlflow_names import TAG_PARENT, TAG_RUN, parse_model_version_uri
from tuner.tune_paths import confirm_run
from tuner.views import MlflowLinks


def _under(path: str, root: str) -> bool:
    """Whether `path` lies strictly inside `root` (never the root itself)."""
    if "://" in root or "://" in path:
        inner = path.rstrip("/").removeprefix(root.rstrip("/") + "/")
        return inner != path.rstrip("/") and bool(inner) and ".." not in inner.split("/")
    resolved, base = Path(path).resolve(), Path(root).resolve()
    return resolved != base and resolved.is_relative_to(base)


def purge_tune_dir(tune_path: str, storage_root: str) -> bool:
    """Deletes the sweep's Tune directory (a local path or an object-store URI), only
    when it lies inside the configured Tune storage; whether something was deleted."""
    if not _under(tune_path, storage_root):
        raise ValueError(f"{tune_path} is not inside the Tune storage {storage_root}")
    if "://" not in tune_path:
        if not Path(tune_path).exists():
            return False
        shutil.rmtree(tune_path)
        return True
    import pyarrow.fs

    fs, path = pyarrow.fs.FileSystem.from_uri(tune_path)
    if fs.get_file_info(path).type == pyarrow.fs.FileType.NotFound:
        return False
    fs.delete_dir(path)
    return True


def purge_mlflow(tracking_uri: str, links: MlflowLinks | None, run_name: str) -> int:
    """Deletes the sweep's parent run, its trial runs and the model versions registered
    from them; the number of runs deleted."""
    if links is None or not links.parent_run_id:
        return 0
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri)
    parent = links.parent_run_id
    try:
        client.get_run(parent)
    except MlflowException:
        return 0  # already gone
    children = client.search_runs(
        [links.experiment_id],
        filter_string=f"tags.`{TAG_PARENT}` = '{parent}'",
        max_results=50_000,
    )
    run_ids = {parent, *(r.info.run_id for r in children)}
    model = parse_model_version_uri(links.model_version or "")
    if model is not None:
        name = model[0]
        versions = client.search_model_versions(f"name = '{name}'")
        mine = [v for v in versions if v.run_id in run_ids or v.tags.get(TAG_RUN) == run_name]
        for version in mine:
            client.delete_model_version(name, version.version)
        if mine and len(mine) == len(versions):
            client.delete_registered_model(name)
    for run_id in run_ids:
        client.delete_run(run_id)
    return len(run_ids)


def purge(
    tune_path: str | None,
    storage_root: str,
    tracking_uri: str,
    mlflow_info: MlflowLinks | dict[str, Any] | None,
    run_name: str,
) -> dict[str, Any]:
    """Both purges; {"tune_dir": bool, "mlflow_runs": int} or {"error": why}.
    `mlflow_info`: the sweep's MLflow links (as the store keeps them: a dict)."""
    try:
        links = MlflowLinks.model_validate(mlflow_info) if mlflow_info else None
        removed = purge_tune_dir(tune_path, storage_root) if tune_path else False
        if tune_path:  # the confirmation stage's run beside it
            removed = purge_tune_dir(confirm_run(tune_path), storage_root) or removed
        runs = purge_mlflow(tracking_uri, links, run_name)
    except Exception as err:  # noqa: BLE001 - reported to the caller (HTTP 502), store kept
        return {"error": f"{type(err).__name__}: {str(err)[:500]}"}
    return {"tune_dir": removed, "mlflow_runs": runs}
