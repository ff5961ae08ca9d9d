"""The driver of one sweep, submitted by the service as a Ray Job:

    python -m tuner.sweep <experiment-id> [--resume]

It reads the spec from the store, runs the sweep with the store and MLflow
callbacks, and writes the outcome back. Settings come from TUNER_* variables
(the launcher passes the service's own in the job's runtime_env). Its stderr is the
job's log: tuner's log records go there as log lines, beside Ray's own.
"""

from __future__ import annotations

import argparse
import logging
import sys
import traceback
from collections.abc import Sequence

from tuner.settings import Settings
from tuner.spec import ExperimentSpec, SpecError, parse_spec
from tuner.statuses import LAUNCHED, SweepStatus
from tuner.store import Store
from tuner.sweep._headwatch import watch_job_head
from tuner.tune_paths import run_dir
from tuner.views import SweepSummary, TrialView


def _tracking(settings: Settings, experiment_name: str) -> object:
    from tuner.tracking import TrackingConfig

    return TrackingConfig(
        tracking_uri=settings.tracking_uri,
        experiment_name=experiment_name,
        artifact_location=None if settings.mlflow_tracking_uri else settings.artifact_root,
        ui_url=settings.mlflow_ui_url,
    )


def _store_trials(store: Store, experiment_id: str, trials: Sequence[TrialView]) -> None:
    """The trials' final rows, as the sweep's summary has them. An error is kept where
    the summary has none (a trial that was retried after it and then finished)."""
    for trial in trials:
        kept = {"error": trial.error} if trial.error else {}
        store.upsert_trial(
            experiment_id,
            trial.trial_id,
            status=trial.status,  # PAUSED: interrupted, resumes from its last checkpoint
            config=trial.config,
            seed=trial.seed,
            iterations=trial.iterations,
            env_steps=trial.env_steps,
            metric=trial.metric,
            best_metric=trial.best_metric,
            score=trial.score,
            train_score=trial.train_score,
            values=trial.values,
            stage=trial.stage,
            checkpoint=trial.checkpoint,
            mlflow_run_id=trial.mlflow_run_id,
            retries=trial.retries,
            **kept,
        )


def _from_the_store(
    store: Store, experiment_id: str, summary: SweepSummary, spec: ExperimentSpec
) -> None:
    """Each trial's metric, peak, scores and objective values from its curve in the store
    (every result of every attempt: after a resume Tune's own history of a trial holds
    only the iterations since); the best's scores follow its trial's."""
    from tuner.sweep._summary import score_scope
    from tuner.sweep._tuner import sweep_ranking
    from tuner.tracking import curve_numbers

    ranking = sweep_ranking(spec)
    found = {}
    for trial in summary.trials:
        numbers = curve_numbers(store, experiment_id, trial.trial_id, ranking)
        if numbers is not None:
            found[trial.trial_id] = (trial, numbers)
    if ranking.final_key is not None and found:
        # the key the scores come from, decided again from these curves (and named so)
        summary.ranked_by = ranking.final_key
        if not any(n["score"] is not None for _, n in found.values()):
            summary.ranked_by = spec.metric
            for _, numbers in found.values():  # none ran its budget: the training metric
                numbers["score"] = numbers["train_score"]
    for trial, numbers in found.values():
        for field, value in numbers.items():
            setattr(trial, field, value)
    best = summary.best
    if best is None:
        return
    for view in (best, best.search_best):
        trial = found.get(view.trial_id, (None, {}))[0] if view is not None else None
        if trial is not None and trial.score is not None:
            view.metric_value = trial.score
            view.train_score = trial.train_score
            view.scope = score_scope(spec, summary.ranked_by or "")
    if spec.search.race is not None:  # a raced config's score: its seeds' mean, as above
        from tuner.seed_stats import race_groups, race_record

        groups = race_groups(summary.trials, spec.mode)
        for view in (best, best.search_best):
            mine = [g for g in groups if view is not None and view.config == g.trials[0].config]
            if view is not None and mine and mine[0].mean is not None:
                view.metric_value = mine[0].mean
                if view is best:
                    best.race = race_record(mine[0], spec.seed)


def _search_ended(
    store: Store, experiment_id: str, found: SweepSummary, spec: ExperimentSpec
) -> None:
    """What the search found, stored before a confirmation stage starts."""
    _from_the_store(store, experiment_id, found, spec)
    _store_trials(store, experiment_id, found.trials)


class _JobLog(logging.StreamHandler):
    """tuner's records in the job's log (stderr): time, level and module, as Ray's own
    lines there."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)
        self.setFormatter(logging.Formatter("%(asctime)s\t%(levelname)s %(name)s -- %(message)s"))


def log_to_stderr() -> None:
    """Shows tuner's records, INFO and above, in the job's log; once, however often it is
    called. Records stop at the `tuner` logger: a handler some library puts on the root
    logger never prints them a second time."""
    logger = logging.getLogger("tuner")
    for handler in [h for h in logger.handlers if isinstance(h, _JobLog)]:
        logger.removeHandler(handler)
    logger.addHandler(_JobLog())
    logger.setLevel(logging.INFO)
    logger.propagate = False


def main(argv: list[str] | None = None) -> int:
    """Runs the sweep of one stored experiment; returns the process exit code."""
    log_to_stderr()
    # first: a head that dies before ray.init connects would leave the driver hanging in
    # it for minutes (it retries a dead GCS); the watch ends the driver within 10 s
    watch_job_head()
    parser = argparse.ArgumentParser(prog="python -m tuner.sweep")
    parser.add_argument("experiment_id")
    parser.add_argument("--resume", action="store_true")
    args = parser.parse_args(argv)
    settings = Settings()
    store = Store(settings.store_url)
    rec = store.get_experiment(args.experiment_id)
    if rec is None:
        print(f"no experiment {args.experiment_id!r} in the store", file=sys.stderr)
        return 2
    from tuner.spec import resolve_space
    from tuner.sweep._graceful import GracefulStop, StopRequested
    from tuner.sweep._run import SweepOptions, run_sweep
    from tuner.sweep._tuner import sweep_ranking
    from tuner.tracking import StoreRecorder

    try:
        spec = parse_spec(rec.spec)
        name = rec.id  # the Tune run directory and the MLflow parent run are named by id
        store.update_experiment(rec.id, tune_path=run_dir(settings.tune_storage, name))
        space = resolve_space(spec)  # once: the recorder and the sweep share it
        recorder = StoreRecorder(
            settings.store_url,
            rec.id,
            spec.metric,
            spec.mode,
            space,
            spec.seed,
            spec=spec,
            ranking=sweep_ranking(spec),
        )
        options = SweepOptions(
            storage_path=settings.tune_storage,
            name=name,
            resume=args.resume,
            progress=False,
            # a stop gives running trials up to half the stop timeout to checkpoint,
            # before the supervisor would end the job by force
            callbacks=[
                recorder,
                GracefulStop(settings.store_url, rec.id, settings.stop_timeout_s / 2),
            ],
            ray_address="auto",
            tracking=_tracking(settings, spec.name),
            stoppers=[StopRequested(settings.store_url, rec.id)],
            check_fit=settings.cluster_fit_check,
            space=space,
            allowed_modules=settings.allowed_module_list,
            growth_nodes=settings.growth_nodes,
            on_search_end=lambda found: _search_ended(store, rec.id, found, spec),
            # the search's numbers from every attempt's curve, before its best is chosen
            rescore=lambda found: _from_the_store(store, rec.id, found, spec),
        )
        summary = run_sweep(spec, options)
    except SpecError as err:
        store.transition(rec.id, SweepStatus.FAILED, allowed_from=LAUNCHED, error=str(err))
        return 2
    except Exception:  # noqa: BLE001 - the service shows whatever ended the driver
        # the whole traceback: the store keeps its last lines, which explain it
        error = traceback.format_exc()
        store.transition(rec.id, SweepStatus.FAILED, allowed_from=LAUNCHED, error=error)
        raise
    now = store.get_experiment(rec.id) or rec
    _from_the_store(store, rec.id, summary, spec)
    _store_trials(store, rec.id, summary.trials)
    best = summary.best.model_dump(mode="json") if summary.best else None
    status = SweepStatus.STOPPED if now.stop_requested else summary.status
    warnings = list(summary.warnings)
    earlier = {}
    if now.error and status != SweepStatus.FAILED:
        # what ended an earlier attempt (the supervisor resumed it) is history now, not
        # the error of a sweep this attempt finished
        warnings.append(f"an earlier attempt of this sweep ended early: {now.error}")
        earlier = {"error": None}
    store.update_experiment(
        rec.id,
        best=best,
        confirmation=[c.model_dump(mode="json") for c in summary.confirmation] or None,
        pareto=[m.model_dump(mode="json") for m in summary.pareto] or None,
        importance=summary.importance or None,
        importance_ped_anova=summary.importance_ped_anova or None,
        warnings=warnings,
        mlflow=summary.mlflow.model_dump(mode="json") if summary.mlflow else None,
        **earlier,
    )
    store.transition(rec.id, status, allowed_from=LAUNCHED)
    return 0 if status != SweepStatus.FAILED else 1


if __name__ == "__main__":
    sys.exit(main())
