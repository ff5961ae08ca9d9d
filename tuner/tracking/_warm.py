"""The earlier sweep a warm start reuses (`search.warm_start.from`), read back from
MLflow, where every sweep lands whether the service or `tuner run` ran it: its parent
run, its spec (spec.yaml) and its trials (trials.json)."""

from __future__ import annotations

import json
import os
from typing import Any

from pydantic import BaseModel, Field

from tuner import mlflow_names as names
from tuner.spec import ExperimentSpec, SpecError, parse_spec
from tuner.views import TrialView


class EarlierSweep(BaseModel):
    """A finished sweep, as MLflow keeps it."""

    source: str = Field(..., description="What the warm start named.")
    run_name: str
    parent_run_id: str
    experiment_id: str
    spec: ExperimentSpec
    trials: list[TrialView]


def _parent_runs(client: Any, filter_string: str, experiment_ids: list[str]) -> list[Any]:
    if not experiment_ids:
        return []
    kind = f"tags.`{names.TAG_KIND}` = '{names.KIND_SWEEP}'"
    return list(
        client.search_runs(
            experiment_ids,
            filter_string=f"{kind} and {filter_string}" if filter_string else kind,
            order_by=["attributes.start_time DESC"],
            max_results=20,
        )
    )


def find_earlier_sweep(tracking_uri: str, source: str) -> EarlierSweep:
    """The sweep `source` names: a sweep id or run name (its parent run's tuner.run tag),
    or a sweep name (its MLflow experiment: the latest sweep there that finished).
    Raises SpecError (on search.warm_start.from) naming what is missing."""
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    from mlflow.tracking import MlflowClient

    loc = "search.warm_start.from"
    client = MlflowClient(tracking_uri=tracking_uri)
    experiments = [e.experiment_id for e in client.search_experiments(max_results=1000)]
    quoted = source.replace("'", "")
    runs = _parent_runs(client, f"tags.`{names.TAG_RUN}` = '{quoted}'", experiments)
    if not runs:
        named = client.get_experiment_by_name(source)
        if named is not None:
            finished = "attributes.status = 'FINISHED'"
            runs = _parent_runs(client, finished, [named.experiment_id])
    if not runs:
        raise SpecError.one(
            loc,
            f"no sweep named {source!r} in MLflow ({tracking_uri}): give a sweep id, "
            "a run name or a sweep name that has finished",
            source,
        )
    run = runs[0]
    run_id = run.info.run_id
    try:
        spec_text = _artifact_text(client, run_id, names.SPEC_ARTIFACT)
        trials_text = _artifact_text(client, run_id, names.TRIALS_JSON_ARTIFACT)
    except Exception as err:  # noqa: BLE001 - MLflow's errors, named for the user
        raise SpecError.one(
            loc, f"sweep {source!r} (run {run_id}) has no trials recorded yet: {err}", source
        ) from None
    import yaml

    return EarlierSweep(
        source=source,
        run_name=run.data.tags.get(names.TAG_RUN, ""),
        parent_run_id=run_id,
        experiment_id=run.info.experiment_id,
        spec=parse_spec(yaml.safe_load(spec_text)),
        trials=[TrialView.model_validate(t) for t in json.loads(trials_text)],
    )


def _artifact_text(client: Any, run_id: str, path: str) -> str:
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        local = client.download_artifacts(run_id, path, tmp)
        return Path(local).read_text()


__all__ = ["EarlierSweep", "find_earlier_sweep"]
