"""Run one sweep in this process: validate, connect to Ray, fit, summarise."""

from __future__ import annotations

import logging
import re
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ray import tune
from ray.tune.stopper import Stopper

from tuner.errors import TunerError
from tuner.importance import sweep_importance
from tuner.launcher import ensure_ray
from tuner.mlflow_names import STAGE_CONFIRM, STAGE_SEARCH
from tuner.ray_internals import result_grid_trials
from tuner.results import better, lookup, retries_of, scope_value
from tuner.rllib import (
    alive_nodes,
    check_fits,
    derived_settings,
    evaluate_checkpoint,
    fixed_settings,
    stage_of,
)
from tuner.search_spaces import Domain
from tuner.spec import ExperimentSpec, SpecError, resolve_space
from tuner.statuses import TRIAL_UNFINISHED, SweepStatus, TrialStatus
from tuner.sweep._confirm import confirm_runs, confirm_seeds, confirmed_configs, pick_candidates
from tuner.sweep._headwatch import watch_connected_head
from tuner.sweep._interrupt import InterruptWatch
from tuner.sweep._pareto import confirmed_values, front, missing_values, objective_values
from tuner.sweep._progress import RichProgress
from tuner.sweep._summary import final_score, final_score_key, trial_view_from_result
from tuner.sweep._tuner import build_tuner, restore_tuner, sampled_values
from tuner.tracking import (
    MLflowTracker,
    TrackingConfig,
    WarmStart,
    find_earlier_sweep,
    open_in_background,
    warm_start,
)
from tuner.tune_paths import confirm_run, run_dir
from tuner.validation import validate_spec
from tuner.views import BestTrial, SearchBest, SweepSummary, TrialView

logger = logging.getLogger(__name__)


class StorageError(TunerError, RuntimeError):
    """The Tune storage (TUNER_STORAGE_PATH) cannot be read."""


def latest_run(storage_path: str, spec_name: str) -> str | None:
    """The newest run directory of a spec name that holds Tune state, if any: a local
    path, or a URI on an object store (listed through pyarrow, as Tune does)."""
    import pyarrow.fs as pafs

    try:
        if "://" in storage_path:
            fs, root = pafs.FileSystem.from_uri(storage_path)
        else:
            fs, root = pafs.LocalFileSystem(), str(Path(storage_path).absolute())
        infos = fs.get_file_info(pafs.FileSelector(root, allow_not_found=True))
    except OSError as err:  # unreachable store, no credentials, a file in the way
        raise StorageError(f"cannot list the Tune storage {storage_path}: {err}") from None
    own = re.compile(re.escape(spec_name) + r"_\d{8}-\d{6}")  # not `cartpole_ppo_*` for `cartpole`
    names = sorted(
        i.base_name
        for i in infos
        if i.type == pafs.FileType.Directory and own.fullmatch(i.base_name)
    )
    for name in reversed(names):
        candidate = run_dir(storage_path if "://" in storage_path else root, name)
        if tune.Tuner.can_restore(candidate):
            return candidate
    return None


@contextmanager
def _signal_handlers_restored() -> Iterator[None]:
    """Puts SIGINT / SIGUSR1 back as they were before Tune (and our callbacks) replaced
    them, so a Ctrl-C after the fit behaves as the caller expects."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGUSR1)}
    try:
        yield
    finally:
        for sig, handler in saved.items():
            if handler is not None:
                signal.signal(sig, handler)


def with_scheme(path: str | None, storage_path: str) -> str | None:
    """Tune reports paths on an object store without their scheme ('bucket/run/...');
    give them back the storage's ('s3://bucket/run/...') so they can be used as is."""
    if not path or "://" not in storage_path or "://" in path:
        return path
    return f"{storage_path.split('://', 1)[0]}://{path}"


def _newest_checkpoint_dir(result: Any) -> str | None:
    """A checkpoint on disk that Tune's result does not list: a trial the sweep's end
    (stop_on_target, time budget) stopped saves its last checkpoint after Tune stops
    recording results."""
    import pyarrow.fs as pafs

    fs = result.filesystem
    if fs is None or not result.path:
        return None
    infos = fs.get_file_info(pafs.FileSelector(result.path, allow_not_found=True))
    dirs = sorted(
        i.path
        for i in infos
        if i.type == pafs.FileType.Directory and i.base_name.startswith("checkpoint_")
    )
    return dirs[-1] if dirs else None


def summarise(
    spec: ExperimentSpec,
    result_grid: Any,
    warnings: Sequence[str] = (),
    interrupted: bool = False,
    space: dict[str, Domain] | None = None,
    confirming: bool = False,
) -> SweepSummary:
    """The SweepSummary of a finished (or, `interrupted`, stopped) Tune run over the
    resolved `space` (`confirming`: of the confirmation stage). Trials are ranked by
    their metric under the spec's scope; `best_metric` keeps each one's peak."""
    space = resolve_space(spec) if space is None else space
    keys = list(space)
    trials = []
    final_key = final_score_key(spec)
    by_path = {t.path: t for t in result_grid_trials(result_grid)}
    configs: dict[str, dict[str, Any]] = {}
    for result in result_grid:
        metrics = result.metrics or {}
        trial = by_path.get(result.path)
        trial_id = trial.trial_id if trial else metrics.get("trial_id", Path(result.path).name)
        best_metric = last_metric = score = None
        history = result.metrics_dataframe
        if history is not None and spec.metric in history:
            col = history[spec.metric].dropna()
            if len(col):
                best_metric = float(col.max() if spec.mode == "max" else col.min())
                last_metric = float(col.iloc[-1])
                # carried over iterations without an episode, then ranked by scope
                score = scope_value(
                    list(history[spec.metric].ffill().dropna()), spec.scope, spec.mode
                )
        train_score = score
        if final_key is not None:
            score = final_score(spec, history, final_key)
        error = None
        if result.error is not None:
            error = f"{type(result.error).__name__}: {result.error}"[:4000]
        # After an interrupt Tune reports every stopped trial TERMINATED; only a trial
        # that really finished has `done` in its last result. The others resume.
        status = TrialStatus.ERROR if error else TrialStatus.TERMINATED
        if interrupted and not error and not metrics.get("done"):
            status = TrialStatus.PAUSED
        # Tune's own trial config still holds a confirmation trial's values and seed
        config = (trial.config if trial else None) or result.config or {}
        view = trial_view_from_result(
            trial_id,
            status,
            metrics,
            sampled=sampled_values(config, keys),
            metric=spec.metric,
            base_seed=spec.seed,
            best_metric=best_metric,
            last_metric=last_metric,
            score=score,
            stage=STAGE_CONFIRM if confirming else stage_of(config),
            error=error,
            config=config,  # a confirmation trial's seed, when its result names none
        )
        view.train_score = train_score
        view.values = objective_values(spec, history)
        if trial is not None:
            view.retries = retries_of(trial.num_failures, status == TrialStatus.ERROR)
        best_ckpt = None
        if not confirming:  # a confirmation trial is judged by its final checkpoint
            try:
                best_ckpt = result.get_best_checkpoint(spec.metric, spec.mode)
            except (RuntimeError, KeyError, ValueError):
                pass
        ckpt = best_ckpt or result.checkpoint
        view.checkpoint = ckpt.path if ckpt is not None else _newest_checkpoint_dir(result)
        trials.append(view)
        configs[trial_id] = config
    ranked_by = final_key or spec.metric
    if final_key is not None and trials and all(t.score is None for t in trials):
        # no trial ran its budget (all stopped early): the training metric ranks them
        ranked_by = spec.metric
        for t in trials:
            t.score = t.train_score
        if not confirming and any(t.score is not None for t in trials):
            warnings = [
                *warnings,
                f"no trial ran its budget to its final deterministic evaluation "
                f"({final_key}): trials are ranked by the training metric {spec.metric}",
            ]
    best: BestTrial | None = None
    for view in trials:  # Tune's order: a tie goes to the earlier trial
        if view.score is not None and (
            best is None or better(view.score, best.metric_value, spec.mode)
        ):
            best = _best_trial(spec, view, configs[view.trial_id])
    trials.sort(key=lambda t: t.trial_id)
    if interrupted or any(t.status in TRIAL_UNFINISHED for t in trials):
        status = SweepStatus.STOPPED  # interrupted: `--resume` (or POST /resume) continues it
    else:
        finished = any(t.status == TrialStatus.TERMINATED for t in trials)
        errored = [t for t in trials if t.status == TrialStatus.ERROR]
        status = SweepStatus.SUCCEEDED if finished else SweepStatus.FAILED
        if finished and errored:
            status = SweepStatus.PARTIAL  # a resume retries them from their checkpoints
            each = ", ".join(f"{t.trial_id} after {t.retries} retries" for t in errored)
            warnings = [
                *warnings,
                f"{len(errored)} of {len(trials)} trials failed for good ({each}): the "
                "best is of the trials that finished; `tuner resume` retries the failed "
                "ones from their checkpoints",
            ]
    summary = SweepSummary(
        name=spec.name,
        status=status,
        metric=spec.metric,
        mode=spec.mode,
        ranked_by=ranked_by,
        best=best,
        trials=trials,
        warnings=list(warnings),
        path=getattr(result_grid, "experiment_path", None),
    )
    if not confirming:
        summary.pareto = front(spec, trials)
        if (missing := missing_values(spec, trials)) is not None:
            summary.warnings.append(missing)
        top = summary.pareto[0].trial_id if summary.pareto else None
        if best is not None and top not in (None, best.trial_id):
            view = next(t for t in trials if t.trial_id == top)
            if view.score == best.metric_value:  # a tie: the front's first is better on the rest
                summary.best = _best_trial(spec, view, configs[top])
        for field, value in _importance(trials, space, spec.mode).items():
            setattr(summary, field, value)
    summary._tune_configs = configs
    return summary


def _best_trial(spec: ExperimentSpec, view: TrialView, config: dict[str, Any]) -> BestTrial:
    """The BestTrial of a trial's view and its Tune config (the search's answer)."""
    assert view.score is not None
    derived_config, derived_resources = derived_settings(config, spec)
    return BestTrial(
        trial_id=view.trial_id,
        config=view.config,
        seed=view.seed,
        full_config={**fixed_settings(spec), **derived_config, **view.config},
        resources=derived_resources,
        metric_value=view.score,
        train_score=view.train_score,
        scope=spec.scope,
        checkpoint=view.checkpoint,
        checkpoint_trial_id=view.trial_id,
    )


def the_answer(spec: ExperimentSpec, summary: SweepSummary) -> BestTrial | None:
    """The sweep's answer, the one `best` every surface shows: the confirmed config with
    the best mean over fresh seeds, with its median seed's checkpoint (the one
    registered); where no confirmed config has a mean, the search's best trial. The
    search's best stays beside it as `search_best`."""
    search = summary.best.search_best if summary.best else None
    if search is None and summary.best is not None and summary.best.source == STAGE_SEARCH:
        search = SearchBest(**summary.best.model_dump(include=set(SearchBest.model_fields)))
    top = next((c for c in summary.confirmation if c.mean is not None), None)
    by_id = {t.trial_id: t for t in summary.trials}
    view = by_id.get(top.trial_id) if top is not None else None
    if top is None or view is None or view.score is None:
        return summary.best
    answer = _best_trial(spec, view, summary.tune_config(view.trial_id))
    median = by_id.get(top.median_trial_id or "")
    answer.source = STAGE_CONFIRM
    answer.confirmed = top
    answer.checkpoint = top.checkpoint
    answer.checkpoint_trial_id = top.median_trial_id
    answer.seed = median.seed if median is not None else None
    answer.search_best = search
    return answer


def _importance(
    trials: list[TrialView], space: dict[str, Domain], mode: str
) -> dict[str, dict[str, float]]:
    """The search's hyperparameter importance by its trials' scores; nothing when it
    cannot be computed (it never fails the sweep)."""
    try:
        return sweep_importance(trials, space, mode)
    except Exception as err:  # noqa: BLE001 - an optional summary of finished trials
        logger.warning("hyperparameter importance not computed: %r", err)
        return {}


def _final_evaluation(
    spec: ExperimentSpec, trial: TrialView, storage_path: str, summary: SweepSummary
) -> float | None:
    """A confirmation trial's score with `evaluation` set: its final checkpoint's return
    over evaluation.duration deterministic episodes (one agent's or policy's where the
    metric names one). None, with a warning, when it has no checkpoint or cannot be
    evaluated: a scope value would mix training returns into evaluation scores."""
    if not trial.checkpoint:
        problem = "it saved no checkpoint"
    else:
        # on an object store: the scheme Tune leaves out, for evaluate to download it
        checkpoint = with_scheme(trial.checkpoint, storage_path) or trial.checkpoint
        try:
            done = evaluate_checkpoint(
                checkpoint, episodes=spec.evaluation.duration, seed=trial.seed or 0
            )
            return done.score(spec.metric)
        except Exception as err:  # noqa: BLE001 - one seed's score, never the sweep
            problem = f"{type(err).__name__}: {err}"
    warning = (
        f"confirmation trial {trial.trial_id} (seed {trial.seed}) has no score: its final "
        f"evaluation failed ({problem})"
    )
    logger.warning(warning)
    summary.warnings.append(warning)
    return None


def _confirm(
    spec: ExperimentSpec,
    summary: SweepSummary,
    storage_path: str,
    name: str,
    callbacks: list[tune.Callback],
    stoppers: Sequence[Stopper],
) -> None:
    """Runs (or continues) the confirmation stage of a finished search and adds its
    trials, the confirmed configs and best.confirmed to `summary` (STOPPED if it was
    interrupted: a resume continues it without re-running the search)."""
    candidates = pick_candidates(spec, summary)
    if not candidates:
        return
    search = [t for t in summary.trials if t.stage == STAGE_SEARCH]
    seeds = confirm_seeds(spec, len(search), {t.seed for t in search if t.seed is not None})
    runs = confirm_runs(candidates, seeds)
    watch = InterruptWatch()
    cbs = [watch, *callbacks]
    previous = run_dir(storage_path, confirm_run(name))
    if tune.Tuner.can_restore(previous):
        logger.info("resuming the confirmation stage %s", previous)
        tuner = restore_tuner(spec, {}, previous, callbacks=cbs, confirm_runs=runs)
    else:
        tuner = build_tuner(
            spec,
            {},
            storage_path=storage_path,
            name=confirm_run(name),
            callbacks=cbs,
            stoppers=list(stoppers),
            confirm_runs=runs,
        )
    with _signal_handlers_restored():
        grid = tuner.fit()
    interrupted = watch.interrupted or any(getattr(cb, "interrupted", False) for cb in cbs)
    keys = list(candidates[0].config)
    stage = summarise(
        spec, grid, interrupted=interrupted, space=dict.fromkeys(keys), confirming=True
    )
    summary.trials.extend(stage.trials)
    scores: dict[str, float | None] = {}
    for trial in stage.trials:
        if trial.status != TrialStatus.TERMINATED:
            scores[trial.trial_id] = None
        elif spec.evaluation.at_end and spec.metric.startswith("evaluation/"):
            scores[trial.trial_id] = trial.metric  # its final evaluation, in the trial
        elif stage.ranked_by != spec.metric and trial.score is not None:
            scores[trial.trial_id] = trial.score  # the same, of a training metric's spec
        elif spec.evaluation.enabled:  # no final evaluation ran: from its last checkpoint
            scores[trial.trial_id] = _final_evaluation(spec, trial, storage_path, summary)
        else:
            scores[trial.trial_id] = trial.score
    summary.confirmation = confirmed_configs(spec, candidates, seeds, stage.trials, scores)
    confirmed_values(spec, summary.confirmation, stage.trials, summary.pareto)
    summary._tune_configs |= stage._tune_configs
    summary.best = the_answer(spec, summary)
    if stage.status == SweepStatus.STOPPED:
        summary.status = SweepStatus.STOPPED


def _warm_start(
    spec: ExperimentSpec, space: dict[str, Domain], tracking: TrackingConfig | None
) -> WarmStart:
    """The warm start of the spec, from the earlier sweep MLflow keeps."""
    if tracking is None:
        raise SpecError.one(
            "search.warm_start",
            "a warm start reads the earlier sweep from MLflow: run with tracking",
            spec.search.warm_start.model_dump() if spec.search.warm_start else None,
        )
    assert spec.search.warm_start is not None
    earlier = find_earlier_sweep(tracking.tracking_uri, spec.search.warm_start.from_)
    return warm_start(spec, space, earlier)


def run_sweep(
    spec: ExperimentSpec,
    *,
    storage_path: str | Path,
    name: str | None = None,
    resume: bool = False,
    progress: bool = True,
    progress_to_stderr: bool = False,
    callbacks: Sequence[tune.Callback] = (),
    ray_address: str | None = None,
    tracking: TrackingConfig | None = None,
    stoppers: Sequence[Stopper] = (),
    check_fit: bool = True,
    space: dict[str, Domain] | None = None,
    allowed_modules: Sequence[str] | None = None,
    growth_nodes: Sequence[dict[str, float]] = (),
    max_asha_rungs: int | None = None,
    on_search_end: Callable[[SweepSummary], None] | None = None,
) -> SweepSummary:
    """Runs (or, with resume, continues) the spec's sweep and returns its summary.

    `space` is the resolved search space (tuner.search_spaces.resolve_space), resolved
    here when not given; every part of the sweep uses this one. `allowed_modules`: the
    module prefixes whose code the spec may name by import path (None, for a caller
    running its own spec in-process: any env; code settings only RLlib's own classes).
    `max_asha_rungs`: the most ASHA rungs allowed (`tuner run`: TUNER_MAX_ASHA_RUNGS).
    `on_search_end`: called with the search's summary (its trials' scores and MLflow
    runs) before a confirmation stage starts, so a driver that dies during it has
    already stored what the search found.

    With `tracking`, every trial is a nested MLflow run under the sweep's run.
    Raises SpecError before any trial starts when the spec cannot run here (with
    `check_fit`, also when one trial needs more than the cluster's alive nodes have).
    """
    space = resolve_space(spec) if space is None else space
    warnings = validate_spec(
        spec, space=space, allowed_modules=allowed_modules, max_asha_rungs=max_asha_rungs
    )
    # MLflow's store opens while Ray starts (seconds each); a spec refused above touches
    # neither (`tuner run` has begun both before its check, beside RLlib's import)
    opening = open_in_background(tracking.tracking_uri) if tracking is not None else None
    try:
        ensure_ray(ray_address)
        if ray_address is not None:  # a cluster's head, not our own: end with it
            watch_connected_head()
        if check_fit:
            check_fits(spec, [*alive_nodes(), *growth_nodes])  # autoscaling: what it can add
    finally:
        if opening is not None:
            opening.join()
    storage_path = str(storage_path)
    if "://" not in storage_path:
        storage_path = str(Path(storage_path).absolute())
    space_keys = list(space)
    previous = None
    if resume:
        previous = run_dir(storage_path, name) if name else latest_run(storage_path, spec.name)
        if previous is None or not tune.Tuner.can_restore(previous):
            previous = None
    if previous is not None:
        name = previous.rstrip("/").rsplit("/", 1)[-1]
    name = name or f"{spec.name}_{time.strftime('%Y%m%d-%H%M%S')}"
    watch = InterruptWatch()
    cbs: list[tune.Callback] = [watch, *callbacks]
    tracker = None
    if tracking is not None:
        tracker = MLflowTracker(
            spec,
            tracking_uri=tracking.tracking_uri,
            run_name=name,
            space_keys=space_keys,
            experiment_name=tracking.experiment_name,
            artifact_location=tracking.artifact_location,
        )
        tracker.start()
        cbs.append(tracker)
    if progress:
        cbs.append(RichProgress(spec.metric, space_keys, stderr=progress_to_stderr))
    if previous is not None:
        logger.info("resuming %s", previous)
        tuner = restore_tuner(spec, space, previous, callbacks=cbs)
    else:
        warm = None
        if spec.search.warm_start is not None:
            warm = _warm_start(spec, space, tracking)
            warnings = [*warnings, *warm.warnings]
            for line in warm.warnings:
                logger.warning(line)
            if tracker is not None:
                tracker.note_warm_start(warm.source, warm.parent_run_id)
        tuner = build_tuner(
            spec,
            space,
            storage_path=storage_path,
            name=name,
            callbacks=cbs,
            stoppers=list(stoppers),
            warm=warm,
        )
    with _signal_handlers_restored():  # Tune's and ours stay inside the fit
        result_grid = tuner.fit()
    # GracefulStop.interrupted covers the stop_all fallback, where no handler ran
    interrupted = watch.interrupted or any(getattr(cb, "interrupted", False) for cb in cbs)
    summary = summarise(spec, result_grid, warnings, interrupted=interrupted, space=space)
    if spec.confirm is not None and summary.status in (SweepStatus.SUCCEEDED, SweepStatus.PARTIAL):
        if on_search_end is not None:
            for trial in summary.trials:  # as at the end (the same paths, the same runs)
                trial.checkpoint = with_scheme(trial.checkpoint, storage_path)
            if tracker is not None:
                tracker.link_trials(summary.trials)
            on_search_end(summary)
        _confirm(
            spec, summary, storage_path, name, [*callbacks, *cbs[len(callbacks) + 1 :]], stoppers
        )
    summary.path = with_scheme(summary.path, storage_path)
    for trial in summary.trials:
        trial.checkpoint = with_scheme(trial.checkpoint, storage_path)
    for confirmed in summary.confirmation:
        confirmed.checkpoint = with_scheme(confirmed.checkpoint, storage_path)
    for member in summary.pareto:
        member.checkpoint = with_scheme(member.checkpoint, storage_path)
    if summary.best is not None:
        summary.best.checkpoint = with_scheme(summary.best.checkpoint, storage_path)
        if summary.best.search_best is not None:
            search = summary.best.search_best
            search.checkpoint = with_scheme(search.checkpoint, storage_path)
    if tracker is not None:
        links = tracker.finish(summary)
        links.url = tracking.run_url(links.experiment_id, links.parent_run_id)
        summary.mlflow = links
    return summary


__all__ = [
    "StorageError",
    "ensure_ray",
    "latest_run",
    "lookup",
    "run_sweep",
    "summarise",
    "the_answer",
]
