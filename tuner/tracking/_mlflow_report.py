"""The sweep's result on its MLflow parent run: the best config (params, metric,
artifact), the registered model of its checkpoint, the trials table and the learning
curves."""

from __future__ import annotations

import csv
import io
import json
import tempfile
import time
from pathlib import Path
from typing import Any, Protocol

from mlflow.entities import Metric

from tuner import mlflow_names as names
from tuner.statuses import SweepStatus, TrialStatus
from tuner.tracking._mlflow_writer import (
    RUN_FAILED,
    RUN_FINISHED,
    RUN_KILLED,
    RunWriter,
    param_value,
)
from tuner.views import BestTrial, MlflowLinks, SweepSummary


class SweepRuns(Protocol):
    """What the report needs of a sweep's MLflow runs (the tracker has it all)."""

    client: Any
    experiment_id: str
    experiment_name: str
    parent_run_id: str
    run_name: str
    metric: str

    @property
    def runs(self) -> RunWriter: ...


def log_sweep_result(tracker: SweepRuns, summary: SweepSummary) -> MlflowLinks:
    """Logs the summary on the tracker's parent run and registers the best checkpoint.

    Returns where the sweep landed (no UI link: the tracker does not know the UI)."""
    client, parent = tracker.client, tracker.parent_run_id
    out = MlflowLinks(experiment_id=tracker.experiment_id, parent_run_id=parent)
    best = summary.best  # the answer (tuner.sweep.the_answer): every record names it
    # a stopped sweep's best is the best so far: a version is registered once it ends
    registers = summary.status in (SweepStatus.SUCCEEDED, SweepStatus.PARTIAL)
    if best is not None:
        runs = {t.trial_id: t.mlflow_run_id for t in summary.trials}
        out.best_run_id = best.mlflow_run_id = runs.get(best.trial_id)
        model_run = runs.get(best.checkpoint_trial_id or best.trial_id)
        if model_run and best.checkpoint and registers:
            out.model_version = _register(tracker, model_run, best, summary)
            best.model_version = out.model_version
        _log_best(tracker, best, summary)
    _log_importance(tracker, summary)
    _log_pareto(tracker, summary)
    _log_trials_table(tracker, summary)
    _log_learning_curves(tracker, summary)
    errored = sum(t.status == TrialStatus.ERROR for t in summary.trials)
    tags = {names.TAG_STATUS: str(summary.status), names.TAG_ERRORED: str(errored)}
    tracker.runs.log(parent, tags=tags)
    # PARTIAL: its run finished (a best of the trials that did), its tags say the rest
    outcome = {
        SweepStatus.SUCCEEDED: RUN_FINISHED,
        SweepStatus.PARTIAL: RUN_FINISHED,
        SweepStatus.STOPPED: RUN_KILLED,
    }
    status = outcome.get(summary.status, RUN_FAILED)
    client.set_terminated(parent, status=status)
    return out


def _log_best(tracker: SweepRuns, best: BestTrial, summary: SweepSummary) -> None:
    """The answer on the parent run: its config as `best.<key>` params, its trial, seed,
    source and model version as tags, its score (and confirmed statistics) as metrics,
    best_config.json and confirmation.json."""
    client, parent = tracker.client, tracker.parent_run_id
    params = {f"{names.BEST_PREFIX}{k}": v for k, v in best.config.items()}
    params.update({names.PARAM_BEST_TRIAL: best.trial_id, names.PARAM_BEST_SEED: best.seed})
    # MLflow params are write-once: a sweep interrupted and resumed reports its best
    # again. Params already there with another value go in as tags instead.
    logged = client.get_run(parent).data.params
    moved = {k: v for k, v in params.items() if k in logged and logged[k] != param_value(v)}
    params = {k: v for k, v in params.items() if k not in logged}
    now = int(time.time() * 1000)
    metrics = {names.best_metric(tracker.metric): best.metric_value}
    confirmed = best.confirmed
    if confirmed is not None:
        metrics |= {
            names.CONFIRMED_MEAN: confirmed.mean,
            names.CONFIRMED_STD: confirmed.std,
            names.CONFIRMED_CI_LOW: (confirmed.ci95 or [None])[0],
            names.CONFIRMED_CI_HIGH: (confirmed.ci95 or [None, None])[-1],
            names.CONFIRMED_IQM: confirmed.iqm,
        }
    tags = {
        names.TAG_BEST_TRIAL: best.trial_id,
        names.TAG_BEST_RUN: best.mlflow_run_id or "",
        names.TAG_BEST_SOURCE: best.source,
        names.TAG_BEST_CHECKPOINT_TRIAL: best.checkpoint_trial_id or "",
        names.TAG_BEST_MODEL: best.model_version or "",
        **{f"{names.MOVED_PARAM_PREFIX}{k}": param_value(v) for k, v in moved.items()},
    }
    if best.search_best is not None:
        tags[names.TAG_SEARCH_BEST_TRIAL] = best.search_best.trial_id
    tracker.runs.log(
        parent,
        params=params,
        metrics=[Metric(k, v, now, 0) for k, v in metrics.items() if v is not None],
        tags=tags,
    )
    client.log_text(
        parent, json.dumps(best.model_dump(mode="json"), indent=2), names.BEST_CONFIG_ARTIFACT
    )
    if summary.confirmation:
        client.log_text(
            parent,
            json.dumps([c.model_dump(mode="json") for c in summary.confirmation], indent=2),
            names.CONFIRMATION_ARTIFACT,
        )


def _register(tracker: SweepRuns, run_id: str, best: BestTrial, summary: SweepSummary) -> str:
    """Registers the answer's checkpoint, runs:/<its run>/checkpoints/<name>, as a
    version of '<experiment>-best', tagged with the sweep's run name and outcome
    (SUCCEEDED, or PARTIAL: some trial failed for good), the config, the seed and the
    confirmed score, and described for a person reading the MLflow UI."""
    assert best.checkpoint is not None
    client = tracker.client
    name = names.registered_model(tracker.experiment_name)
    try:
        client.get_registered_model(name)
    except Exception:  # noqa: BLE001 - MlflowException RESOURCE_DOES_NOT_EXIST
        client.create_registered_model(
            name, description=f"Best checkpoints of tuner sweeps named {tracker.experiment_name}"
        )
    confirmed = best.confirmed
    tags = {
        names.TAG_RUN: tracker.run_name,
        names.TAG_STATUS: str(summary.status),
        names.TAG_BEST_SOURCE: best.source,
        names.TAG_TRIAL: best.checkpoint_trial_id or best.trial_id,
        names.TAG_MODEL_CONFIG_OF: best.trial_id,
        names.TAG_MODEL_CONFIG: json.dumps(best.config, sort_keys=True, default=str),
        names.TAG_MODEL_SEED: str(best.seed),
        names.TAG_MODEL_SCORE: str(confirmed.mean if confirmed else best.metric_value),
    }
    version = client.create_model_version(
        name,
        source=names.checkpoint_source(run_id, Path(best.checkpoint).name),
        run_id=run_id,
        tags=tags,
        description=model_description(best, tracker.metric),
    )
    return names.model_version_uri(name, version.version)


def model_description(best: BestTrial, metric: str) -> str:
    """What a person reads on the model version's page.

    The config, its score and how sure, and where the checkpoint comes from.

    Args:
        best: The sweep's answer (the_answer).
        metric: The spec's metric.

    Returns:
        The description (Markdown).
    """
    config = ", ".join(f"{k}={v}" for k, v in best.config.items()) or "(no sampled keys)"
    confirmed = best.confirmed
    if best.source == names.STAGE_CONFIRM and confirmed is not None and confirmed.mean is not None:
        ci = confirmed.ci95 or [confirmed.mean, confirmed.mean]
        score = (
            f"Confirmed over {len(confirmed.seeds)} fresh seeds: {metric} mean "
            f"{confirmed.mean:.4g} (95 % CI {ci[0]:.4g} to {ci[1]:.4g}, IQM "
            f"{confirmed.iqm:.4g}). The checkpoint is the median-score seed's "
            f"(seed {best.seed}, trial {best.checkpoint_trial_id})."
        )
    else:
        raced = f", the mean over its seeds {best.race.seeds}" if best.race is not None else ""
        score = (
            f"Search best, not confirmed on fresh seeds: {metric} {best.metric_value:.4g} "
            f"({best.scope}{raced}; trial {best.trial_id}, seed {best.seed})."
        )
    return f"Best config of search trial {best.trial_id}: {config}. {score}"


def _log_importance(tracker: SweepRuns, summary: SweepSummary) -> None:
    """importance.json (both evaluators) and a metric importance.<key> (fANOVA) per key."""
    if not (summary.importance or summary.importance_ped_anova):
        return
    client, parent = tracker.client, tracker.parent_run_id
    now = int(time.time() * 1000)
    tracker.runs.log(
        parent,
        metrics=[
            Metric(names.importance_metric(k), v, now, 0) for k, v in summary.importance.items()
        ],
    )
    body = summary.model_dump(
        mode="json", include={"metric", "mode", "importance", "importance_ped_anova"}
    )
    client.log_text(parent, json.dumps(body, indent=2), names.IMPORTANCE_ARTIFACT)


def _log_pareto(tracker: SweepRuns, summary: SweepSummary) -> None:
    """With several objectives: pareto.json on the parent run (the objectives and the
    front's members with their values), the objectives as a parent tag, and
    tuner.pareto=true on each member's child run (false on the other search trials')."""
    if not summary.pareto:
        return
    client, parent = tracker.client, tracker.parent_run_id
    objectives = list(summary.pareto[0].values)
    body = {
        "objectives": objectives,
        "pareto": [m.model_dump(mode="json") for m in summary.pareto],
    }
    client.log_text(parent, json.dumps(body, indent=2), names.PARETO_ARTIFACT)
    tracker.runs.log(parent, tags={names.TAG_OBJECTIVES: ",".join(objectives)})
    on_front = {m.trial_id for m in summary.pareto}
    for trial in summary.trials:  # "false" too: a resumed sweep's front can move
        if trial.mlflow_run_id and trial.values is not None and trial.stage == names.STAGE_SEARCH:
            flag = "true" if trial.trial_id in on_front else "false"
            tracker.runs.log(trial.mlflow_run_id, tags={names.TAG_PARETO: flag})


def _log_trials_table(tracker: SweepRuns, summary: SweepSummary) -> None:
    client, parent = tracker.client, tracker.parent_run_id
    rows = [t.model_dump(mode="json", exclude_none=False) for t in summary.trials]
    client.log_text(parent, json.dumps(rows, indent=1), names.TRIALS_JSON_ARTIFACT)
    keys = sorted({k for t in summary.trials for k in t.config})
    buf = io.StringIO()
    writer = csv.writer(buf)
    cols = ["trial_id", "status", "seed", "iterations", "env_steps", "metric", "best_metric"]
    writer.writerow(cols + keys + ["mlflow_run_id", "error"])
    for t in summary.trials:
        writer.writerow(
            [getattr(t, c) for c in cols]
            + [t.config.get(k) for k in keys]
            + [t.mlflow_run_id, (t.error or "").splitlines()[0] if t.error else ""]
        )
    client.log_text(parent, buf.getvalue(), names.TRIALS_CSV_ARTIFACT)


def _log_learning_curves(tracker: SweepRuns, summary: SweepSummary) -> None:
    # The object API, not pyplot: no global figure state, no GUI backend, a light import.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    client = tracker.client
    fig = Figure(figsize=(8, 5))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    for t in summary.trials:
        if not t.mlflow_run_id:
            continue
        history = client.get_metric_history(t.mlflow_run_id, tracker.metric)
        if history:
            points = sorted((m.step, m.value) for m in history)
            ax.plot([p[0] for p in points], [p[1] for p in points], label=t.trial_id)
    ax.set_xlabel("env steps sampled")
    ax.set_ylabel(tracker.metric)
    ax.set_title(f"{summary.name}: learning curves")
    if summary.trials:
        ax.legend(fontsize="small", ncol=2)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / names.CURVES_ARTIFACT
        fig.savefig(path, dpi=100)
        client.log_artifact(tracker.parent_run_id, str(path))
