"""Run one sweep in this process: validate, connect to Ray, fit, summarise."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ray import tune
from ray.tune.stopper import Stopper

from tuner.errors import TunerError
from tuner.launcher import ensure_ray
from tuner.results import lookup
from tuner.rllib import alive_nodes, check_fits
from tuner.search_spaces import Domain
from tuner.spec import ExperimentSpec, SpecError, resolve_space
from tuner.statuses import SweepStatus
from tuner.sweep._confirm_stage import run_confirmation
from tuner.sweep._graceful import signal_handlers_restored
from tuner.sweep._headwatch import watch_connected_head
from tuner.sweep._interrupt import InterruptWatch
from tuner.sweep._progress import RichProgress
from tuner.sweep._summary import rank_again, summarise, the_answer
from tuner.sweep._tuner import build_tuner, restore_tuner, sweep_ranking
from tuner.tracking import (
    MLflowTracker,
    TrackingConfig,
    WarmStart,
    find_earlier_sweep,
    open_in_background,
    warm_start,
)
from tuner.tune_paths import run_dir, with_scheme
from tuner.validation import validate_spec
from tuner.views import SweepSummary

logger = logging.getLogger(__name__)


class StorageError(TunerError, RuntimeError):
    """The Tune storage (TUNER_STORAGE_PATH) cannot be read."""


def latest_run(storage_path: str, spec_name: str) -> str | None:
    """The newest run directory of a spec name that holds Tune state, if any.

    A local path, or a URI on an object store (listed through pyarrow, as Tune does).

    Args:
        storage_path: The Tune storage (a path or a URI).
        spec_name: The spec's name.

    Returns:
        The run directory, or None.

    Raises:
        StorageError: The storage cannot be listed.
    """
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


@dataclass
class SweepOptions:
    """How `run_sweep` runs a spec: its options in one place.

    As Tune's TuneConfig holds a Tuner's.

    Attributes:
        storage_path: The Tune storage (a path or a URI) the sweep's runs live under.
        name: The Tune run's name (default: `<spec name>_<date>-<time>`).
        resume: Continue the newest run of the spec (or `name`) where it stopped.
        progress: Show the live progress table.
        progress_to_stderr: Write the progress to stderr (stdout keeps the answer).
        callbacks: The caller's Tune callbacks, in both stages.
        ray_address: A cluster's address (None: a local Ray, started here).
        tracking: Where MLflow records the sweep (None: no tracking).
        stoppers: Tune stoppers beside the spec's own.
        check_fit: Refuse a spec whose trial needs more than any alive node has.
        space: The resolved search space (tuner.spec.resolve_space), resolved when None.
        allowed_modules: Module prefixes whose code a spec may name by import path
            (None, for a caller running its own spec in-process: any env, code
            settings only RLlib's own classes).
        growth_nodes: Nodes an autoscaler can add, for the fit check.
        max_asha_rungs: The most ASHA rungs allowed (`tuner run`: TUNER_MAX_ASHA_RUNGS).
        on_search_end: Called with the search's summary (its trials' scores and MLflow
            runs) before a confirmation stage starts, so a driver that dies during it
            has already stored what the search found.
        rescore: Called with the search's summary right after the search, to set each
            trial's numbers from a fuller record of its curve than Tune keeps after a
            resume (the service's store); the best is then chosen again from them
            (`rank_again`), before the confirmation and MLflow's summary.
    """

    storage_path: str | Path
    name: str | None = None
    resume: bool = False
    progress: bool = True
    progress_to_stderr: bool = False
    callbacks: Sequence[tune.Callback] = ()
    ray_address: str | None = None
    tracking: TrackingConfig | None = None
    stoppers: Sequence[Stopper] = ()
    check_fit: bool = True
    space: dict[str, Domain] | None = None
    allowed_modules: Sequence[str] | None = None
    growth_nodes: Sequence[dict[str, float]] = ()
    max_asha_rungs: int | None = None
    on_search_end: Callable[[SweepSummary], None] | None = None
    rescore: Callable[[SweepSummary], None] | None = None


@dataclass
class _Sweep:
    """One sweep as its phases share it: what `_prepare` decided."""

    spec: ExperimentSpec
    options: SweepOptions
    space: dict[str, Domain]
    warnings: list[str]
    storage_path: str
    name: str
    previous: str | None  # the run a resume continues
    tracker: MLflowTracker | None = None
    progress: RichProgress | None = None

    def callbacks(self) -> list[tune.Callback]:
        """The callbacks of each stage (which adds its own InterruptWatch): the
        caller's, MLflow's, the progress table."""
        own = [cb for cb in (self.tracker, self.progress) if cb is not None]
        return [*self.options.callbacks, *own]


def run_sweep(
    spec: ExperimentSpec, options: SweepOptions | None = None, **fields: Any
) -> SweepSummary:
    """Runs (or, with `resume`, continues) the spec's sweep and returns its summary.

    Args:
        spec: The experiment spec.
        options: How to run it; or give SweepOptions' fields as keywords.
        **fields: SweepOptions' fields, where `options` is not given.

    Returns:
        The sweep's summary: its trials, the confirmation, the answer (`best`).

    Raises:
        SpecError: Before any trial starts, when the spec cannot run here (with
            `check_fit`, also when one trial needs more than the cluster's alive nodes
            have).
        StorageError: When the Tune storage cannot be read (a resume).

    The phases: prepare (validate, connect, name the run, open MLflow), fit (the
    search), confirm (fresh seeds for the top configs, where the spec asks) and finish
    (paths as the storage names them, MLflow's summary). With `tracking`, every trial is
    a nested MLflow run under the sweep's run.
    """
    if options is None:
        options = SweepOptions(**fields)
    elif fields:
        raise TypeError(f"run_sweep: give options or keywords, not both ({sorted(fields)})")
    sweep = _prepare(spec, options)
    summary = _fit(sweep)
    if options.rescore is not None and summary.trials:
        options.rescore(summary)
        rank_again(spec, summary, sweep.space)
    if spec.confirm is not None and summary.status in (SweepStatus.SUCCEEDED, SweepStatus.PARTIAL):
        _confirm(sweep, summary)
    return _finish(sweep, summary)


def _prepare(spec: ExperimentSpec, options: SweepOptions) -> _Sweep:
    """Validates the spec, connects to Ray (checking that a trial fits), names the run
    (the one a resume continues) and starts the MLflow parent run and the progress."""
    space = resolve_space(spec) if options.space is None else options.space
    warnings = validate_spec(
        spec,
        space=space,
        allowed_modules=options.allowed_modules,
        max_asha_rungs=options.max_asha_rungs,
    )
    _connect(spec, options)
    storage_path = str(options.storage_path)
    if "://" not in storage_path:
        storage_path = str(Path(storage_path).absolute())
    previous = _previous_run(spec, options, storage_path)
    name = previous.rstrip("/").rsplit("/", 1)[-1] if previous else options.name
    sweep = _Sweep(
        spec=spec,
        options=options,
        space=space,
        warnings=warnings,
        storage_path=storage_path,
        name=name or f"{spec.name}_{time.strftime('%Y%m%d-%H%M%S')}",
        previous=previous,
    )
    tracking = options.tracking
    if tracking is not None:
        sweep.tracker = MLflowTracker(
            spec,
            tracking_uri=tracking.tracking_uri,
            run_name=sweep.name,
            space_keys=list(space),
            experiment_name=tracking.experiment_name,
            artifact_location=tracking.artifact_location,
        )
        sweep.tracker.start()
    if options.progress:
        sweep.progress = RichProgress(
            sweep_ranking(spec), list(space), stderr=options.progress_to_stderr
        )
    return sweep


def _connect(spec: ExperimentSpec, options: SweepOptions) -> None:
    """Starts (or joins) Ray and checks that one trial fits the alive nodes (and the
    ones an autoscaler can add). MLflow's store opens meanwhile (seconds each); a spec
    refused before this touches neither."""
    tracking = options.tracking
    opening = open_in_background(tracking.tracking_uri) if tracking is not None else None
    try:
        ensure_ray(options.ray_address)
        if options.ray_address is not None:  # a cluster's head, not our own: end with it
            watch_connected_head()
        if options.check_fit:
            check_fits(spec, [*alive_nodes(), *options.growth_nodes])
    finally:
        if opening is not None:
            opening.join()


def _previous_run(spec: ExperimentSpec, options: SweepOptions, storage_path: str) -> str | None:
    """The run directory a resume continues: `name`'s, else the spec's newest; None
    without one Tune can restore (the sweep then starts afresh)."""
    if not options.resume:
        return None
    if options.name:
        previous: str | None = run_dir(storage_path, options.name)
    else:
        previous = latest_run(storage_path, spec.name)
    if previous is None or not tune.Tuner.can_restore(previous):
        return None
    return previous


def _fit(sweep: _Sweep) -> SweepSummary:
    """The search: Tune's run built (or restored, on a resume) and fitted, summarised."""
    spec, options, space = sweep.spec, sweep.options, sweep.space
    watch = InterruptWatch()
    callbacks = [watch, *sweep.callbacks()]
    if sweep.previous is not None:
        logger.info("resuming %s", sweep.previous)
        tuner = restore_tuner(spec, space, sweep.previous, callbacks=callbacks)
    else:
        warm = None
        if spec.search.warm_start is not None:
            warm = _warm_start(spec, space, options.tracking)
            sweep.warnings.extend(warm.warnings)
            for line in warm.warnings:
                logger.warning(line)
            if sweep.tracker is not None:
                sweep.tracker.note_warm_start(warm.source, warm.parent_run_id)
        tuner = build_tuner(
            spec,
            space,
            storage_path=sweep.storage_path,
            name=sweep.name,
            callbacks=callbacks,
            stoppers=list(options.stoppers),
            warm=warm,
        )
    with signal_handlers_restored():  # Tune's and ours stay inside the fit
        result_grid = tuner.fit()
    # GracefulStop.interrupted covers the stop_all fallback, where no handler ran
    interrupted = watch.interrupted or any(getattr(cb, "interrupted", False) for cb in callbacks)
    return summarise(spec, result_grid, sweep.warnings, interrupted=interrupted, space=space)


def _confirm(sweep: _Sweep, summary: SweepSummary) -> None:
    """The confirmation stage, after the search's findings are handed on (stored, linked
    to their MLflow runs) so a driver that dies in it loses none."""
    if sweep.options.on_search_end is not None:
        for trial in summary.trials:  # as at the end (the same paths, the same runs)
            trial.checkpoint = with_scheme(trial.checkpoint, sweep.storage_path)
        if sweep.tracker is not None:
            sweep.tracker.link_trials(summary.trials)
        sweep.options.on_search_end(summary)
    run_confirmation(
        sweep.spec,
        summary,
        sweep.storage_path,
        sweep.name,
        sweep.callbacks(),
        sweep.options.stoppers,
    )


def _finish(sweep: _Sweep, summary: SweepSummary) -> SweepSummary:
    """Every path as the storage names it (an object store's scheme put back), and the
    sweep's summary recorded in MLflow (its parent run, the registered model)."""
    storage = sweep.storage_path
    summary.path = with_scheme(summary.path, storage)
    for item in [*summary.trials, *summary.confirmation, *summary.pareto]:
        item.checkpoint = with_scheme(item.checkpoint, storage)
    if summary.best is not None:
        summary.best.checkpoint = with_scheme(summary.best.checkpoint, storage)
        if summary.best.search_best is not None:
            search = summary.best.search_best
            search.checkpoint = with_scheme(search.checkpoint, storage)
    tracking = sweep.options.tracking
    if sweep.tracker is not None and tracking is not None:
        links = sweep.tracker.finish(summary)
        links.url = tracking.run_url(links.experiment_id, links.parent_run_id)
        summary.mlflow = links
    return summary


__all__ = [
    "StorageError",
    "SweepOptions",
    "ensure_ray",
    "latest_run",
    "lookup",
    "run_sweep",
    "summarise",
    "the_answer",
]
