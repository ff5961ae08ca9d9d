"""A sweep's summary from Tune's results: each trial's view (tuner/views/) and scores,
the ranking, the sweep's status, and its answer (`the_answer`)."""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tuner.importance import sweep_importance
from tuner.mlflow_names import ITERATION_KEY, STAGE_CONFIRM, STAGE_SEARCH, STEP_KEY
from tuner.ray_internals import result_grid_trials
from tuner.results import lookup, retries_of, scope_value, search_rank, training_metric
from tuner.rllib import derived_settings, rerun_config, seed_of, stage_of
from tuner.search_spaces import Domain
from tuner.seed_stats import RaceGroup, race_groups, race_record
from tuner.spec import ExperimentSpec, resolve_space
from tuner.statuses import TRIAL_UNFINISHED, SweepStatus, TrialStatus
from tuner.sweep._pareto import front, missing_values, objective_values
from tuner.sweep._tuner import final_score_key, sampled_values
from tuner.views import FINAL_SCOPE, BestTrial, SearchBest, SweepSummary, TrialView

logger = logging.getLogger(__name__)


def _finite(value: Any) -> float | None:
    if isinstance(value, int | float) and math.isfinite(value):
        return float(value)
    return None


def trial_view_from_result(
    trial_id: str,
    status: str,
    result: dict[str, Any],
    *,
    sampled: dict[str, Any],
    metric: str,
    base_seed: int,
    last_metric: float | None = None,
    config: dict[str, Any] | None = None,
) -> TrialView:
    """A TrialView from the last (nested or flat) Tune result of a trial. Its seed is the
    one the trial reports (RLlib trials), else the one its `config` gives it (a
    confirmation trial's own; a search trial's spec seed + index). `last_metric`: the
    metric's last reported value (an iteration without an episode reports none)."""
    info = result.get("tuner") or {
        k: lookup(result, f"tuner/{k}") for k in ("seed", "node_id", "device", "cpu")
    }
    seed = info.get("seed")
    return TrialView(
        trial_id=trial_id,
        status=status,
        config=sampled,
        seed=seed if seed is not None else seed_of(config or {}, trial_id, base_seed),
        iterations=int(result.get(ITERATION_KEY) or 0),
        env_steps=int(result.get(STEP_KEY) or 0),
        # an iteration that finished no episode reports no return: the last value carries
        metric=_finite(lookup(result, metric)) if last_metric is None else last_metric,
        node_id=info.get("node_id"),
        node_ip=result.get("node_ip"),
        device=info.get("device"),
        cpu=info.get("cpu"),
    )


def final_score(spec: ExperimentSpec, history: Any, key: str) -> float | None:
    """A trial's final deterministic evaluation (`key` in its last result) where it ran
    its budget (stop.timesteps_total or stop.training_iteration reached); None for a
    trial stopped short of it, or without that evaluation."""
    if history is None or key not in history or not len(history):
        return None
    last = history.iloc[-1]
    stop = spec.stop
    steps, iterations = last.get(STEP_KEY) or 0, last.get(ITERATION_KEY) or 0
    ran = (stop.timesteps_total and steps >= stop.timesteps_total) or (
        stop.training_iteration and iterations >= stop.training_iteration
    )
    return _finite(last.get(key)) if ran else None


def summarise(
    spec: ExperimentSpec,
    result_grid: Any,
    warnings: Sequence[str] = (),
    interrupted: bool = False,
    space: dict[str, Domain] | None = None,
    confirming: bool = False,
) -> SweepSummary:
    """The SweepSummary of a finished (or stopped) Tune run.

    Trials are ranked by their score: the final deterministic evaluation where the spec
    has one (`final_score_key`), else their metric under the spec's scope; `best_metric`
    keeps each one's peak, `train_score` the training metric under scope.

    Args:
        spec: The sweep's spec.
        result_grid: Tune's ResultGrid of the run.
        warnings: The sweep's warnings so far.
        interrupted: The run was stopped before its end.
        space: The resolved search space.
        confirming: The run is the confirmation stage.

    Returns:
        The summary.
    """
    space = resolve_space(spec) if space is None else space
    by_path = {t.path: t for t in result_grid_trials(result_grid)}
    trials: list[TrialView] = []
    configs: dict[str, dict[str, Any]] = {}
    for result in result_grid:
        view, config = _trial_of(
            spec, result, by_path.get(result.path), list(space), interrupted, confirming
        )
        trials.append(view)
        configs[view.trial_id] = config
    warnings = list(warnings)
    ranked_by = _ranked_by(spec, trials, warnings, confirming)
    best = _choose_best(spec, trials, configs, confirming, ranked_by)
    trials.sort(key=lambda t: t.trial_id)
    summary = SweepSummary(
        name=spec.name,
        status=_sweep_status(trials, interrupted, warnings),
        metric=spec.metric,
        mode=spec.mode,
        ranked_by=ranked_by,
        best=best,
        trials=trials,
        warnings=warnings,
        path=getattr(result_grid, "experiment_path", None),
    )
    if not confirming:
        _add_search_findings(spec, summary, configs, space)
    summary._tune_configs = configs
    return summary


def _choose_best(
    spec: ExperimentSpec,
    trials: list[TrialView],
    configs: dict[str, dict[str, Any]],
    confirming: bool,
    ranked_by: str,
) -> BestTrial | None:
    """The best trial by score, a tie by `search_rank`; of a raced search, the best
    config by its seeds' mean."""
    if spec.search.race is not None and not confirming:
        return race_best(spec, trials, configs, ranked_by)
    scored = [view for view in trials if view.score is not None and math.isfinite(view.score)]
    top = min(
        scored,
        key=lambda v: search_rank(v.score, v.train_score, v.seed, v.trial_id, spec.mode),
        default=None,
    )
    return best_trial(spec, top, configs[top.trial_id], ranked_by) if top is not None else None


def rank_again(spec: ExperimentSpec, summary: SweepSummary, space: dict[str, Domain]) -> None:
    """The search's best and findings chosen again, after its trials' numbers were set
    from a fuller record of their curves than Tune's (after a resume Tune's history of a
    trial holds only the iterations since): what the confirmation, MLflow's summary and
    every surface then name.

    Args:
        spec: The sweep's spec.
        summary: The search's summary (from `summarise`), its trials' numbers set again.
        space: The resolved search space.
    """
    configs = summary._tune_configs
    by_id = {t.trial_id: t for t in summary.trials}
    in_tune_order = [by_id[tid] for tid in configs if tid in by_id]
    summary.best = _choose_best(spec, in_tune_order, configs, False, summary.ranked_by or "")
    _add_search_findings(spec, summary, configs, space)


def _trial_of(
    spec: ExperimentSpec,
    result: Any,
    trial: Any,
    keys: list[str],
    interrupted: bool,
    confirming: bool,
) -> tuple[TrialView, dict[str, Any]]:
    """One trial's view from its Tune result (and Tune's Trial, where the grid has it),
    with the Tune config it ran."""
    metrics = result.metrics or {}
    trial_id = trial.trial_id if trial else metrics.get("trial_id", Path(result.path).name)
    history = result.metrics_dataframe
    best_metric, last_metric, scoped, train_score = _curve_values(spec, history)
    error = None
    if result.error is not None:
        error = f"{type(result.error).__name__}: {result.error}"[:4000]
    # After an interrupt Tune reports every stopped trial TERMINATED; only a trial that
    # really finished has `done` in its last result. The others resume.
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
        last_metric=last_metric,
        config=config,  # a confirmation trial's seed, when its result names none
    )
    final_key = final_score_key(spec)
    view.best_metric = best_metric
    view.train_score = train_score
    view.score = scoped if final_key is None else final_score(spec, history, final_key)
    view.stage = STAGE_CONFIRM if confirming else stage_of(config)
    view.error = error
    view.values = objective_values(spec, history)
    if trial is not None:
        view.retries = retries_of(trial.num_failures, status == TrialStatus.ERROR)
    view.checkpoint = _checkpoint_of(spec, result, confirming)
    return view, config


def _curve_values(
    spec: ExperimentSpec, history: Any
) -> tuple[float | None, float | None, float | None, float | None]:
    """(peak, last value, value under scope) of the spec's metric over a trial's curve,
    and the training episodes' metric under scope (`training_metric`: for an
    `evaluation/...` metric its training counterpart); iterations without an episode
    carry the last value before they are ranked."""
    if history is None:
        return None, None, None, None
    train = scope_value(
        _carried_column(history, training_metric(spec.metric)), spec.scope, spec.mode
    )
    col = history[spec.metric].dropna() if spec.metric in history else []
    if not len(col):  # e.g. an evaluation metric of a trial stopped before it evaluated
        return None, None, None, train
    peak = float(col.max() if spec.mode == "max" else col.min())
    scoped = scope_value(_carried_column(history, spec.metric), spec.scope, spec.mode)
    return peak, float(col.iloc[-1]), scoped, train


def _carried_column(history: Any, key: str) -> list[float]:
    """A key's values over Tune's history, each iteration without one carrying the last."""
    return list(history[key].ffill().dropna()) if key in history else []


def _checkpoint_of(spec: ExperimentSpec, result: Any, confirming: bool) -> str | None:
    """A trial's checkpoint: its best by the metric (a confirmation trial: its final
    one), else its last, else the newest on disk."""
    best_ckpt = None
    if not confirming:  # a confirmation trial is judged by its final checkpoint
        try:
            best_ckpt = result.get_best_checkpoint(spec.metric, spec.mode)
        except (RuntimeError, KeyError, ValueError):
            pass
    ckpt = best_ckpt or result.checkpoint
    return ckpt.path if ckpt is not None else _newest_checkpoint_dir(result)


def _ranked_by(
    spec: ExperimentSpec, trials: list[TrialView], warnings: list[str], confirming: bool
) -> str:
    """The key the trials' scores come from. Where no trial ran its budget to its final
    evaluation (all stopped early), the training metric ranks them, with a warning."""
    final_key = final_score_key(spec)
    if final_key is None or not trials or any(t.score is not None for t in trials):
        return final_key or spec.metric
    for t in trials:
        t.score = t.train_score
    if not confirming and any(t.score is not None for t in trials):
        warnings.append(
            f"no trial ran its budget to its final deterministic evaluation ({final_key}): "
            f"trials are ranked by the training metric {spec.metric}"
        )
    return spec.metric


def _sweep_status(trials: list[TrialView], interrupted: bool, warnings: list[str]) -> str:
    """STOPPED (a resume continues it), SUCCEEDED, PARTIAL (some trials failed for good,
    with a warning naming them) or FAILED."""
    if interrupted or any(t.status in TRIAL_UNFINISHED for t in trials):
        return SweepStatus.STOPPED
    finished = any(t.status == TrialStatus.TERMINATED for t in trials)
    errored = [t for t in trials if t.status == TrialStatus.ERROR]
    if not finished:
        return SweepStatus.FAILED
    if not errored:
        return SweepStatus.SUCCEEDED
    each = ", ".join(f"{t.trial_id} after {t.retries} retries" for t in errored)
    warnings.append(
        f"{len(errored)} of {len(trials)} trials failed for good ({each}): the best is of "
        "the trials that finished; `tuner resume` retries the failed ones from their "
        "checkpoints"
    )
    return SweepStatus.PARTIAL


def _add_search_findings(
    spec: ExperimentSpec,
    summary: SweepSummary,
    configs: dict[str, dict[str, Any]],
    space: dict[str, Domain],
) -> None:
    """The search's Pareto front (a tie for best goes to the front's first), and the
    hyperparameter importance by the trials' scores."""
    summary.pareto = front(spec, summary.trials)
    missing = missing_values(spec, summary.trials)
    if missing is not None and missing not in summary.warnings:
        summary.warnings.append(missing)
    best = summary.best
    top = summary.pareto[0].trial_id if summary.pareto else None
    if best is not None and top not in (None, best.trial_id):
        view = next(t for t in summary.trials if t.trial_id == top)
        if view.score == best.metric_value:  # a tie: the front's first is better on the rest
            summary.best = best_trial(spec, view, configs[top], summary.ranked_by or "")
    for field, value in _importance(summary.trials, space, spec.mode).items():
        setattr(summary, field, value)


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


def score_scope(spec: ExperimentSpec, ranked_by: str) -> str:
    """How the trials' scores were taken: FINAL_SCOPE where they are the final
    deterministic evaluation (`ranked_by` its key), else the spec's scope."""
    final = final_score_key(spec)
    return FINAL_SCOPE if final is not None and ranked_by == final else spec.scope


def best_trial(
    spec: ExperimentSpec, view: TrialView, config: dict[str, Any], ranked_by: str
) -> BestTrial:
    """The BestTrial of a trial's view and its Tune config (the search's answer);
    `ranked_by`: the key the sweep's scores come from (SweepSummary.ranked_by)."""
    assert view.score is not None
    derived_config, derived_resources = derived_settings(config, spec)
    return BestTrial(
        trial_id=view.trial_id,
        config=view.config,
        seed=view.seed,
        full_config=rerun_config(spec, derived_config, view.config),
        resources=derived_resources,
        metric_value=view.score,
        train_score=view.train_score,
        scope=score_scope(spec, ranked_by),
        checkpoint=view.checkpoint,
        checkpoint_trial_id=view.trial_id,
    )


def race_best(
    spec: ExperimentSpec,
    trials: list[TrialView],
    configs: dict[str, dict[str, Any]],
    ranked_by: str,
) -> BestTrial | None:
    """A raced search's best (search.race): the first config of the race's ranking
    (tuner.sweep._race), its score the mean over its seeds, its trial, seed and
    checkpoint its median-score seed's."""
    top = next((g for g in race_groups(trials, spec.mode) if g.mean is not None), None)
    if top is None or top.representative.score is None:
        return None
    rep = top.representative
    return _with_race(spec, best_trial(spec, rep, configs[rep.trial_id], ranked_by), top)


def _with_race(spec: ExperimentSpec, answer: BestTrial, group: RaceGroup | None) -> BestTrial:
    """The answer with its config's race: the seeds' scores, their mean its score."""
    if group is None or group.mean is None:
        return answer
    answer.metric_value = group.mean
    answer.race = race_record(group, spec.seed)
    return answer


def the_answer(spec: ExperimentSpec, summary: SweepSummary) -> BestTrial | None:
    """The sweep's answer, the one `best` every surface shows.

    The confirmed config with the best mean over fresh seeds, with its median seed's
    checkpoint (the one registered); where no confirmed config has a mean, the search's
    best trial. The search's best stays beside it as `search_best`.

    Args:
        spec: The sweep's spec.
        summary: The sweep's summary.

    Returns:
        The best trial, or None where there is none.
    """
    search = summary.best.search_best if summary.best else None
    if search is None and summary.best is not None and summary.best.source == STAGE_SEARCH:
        search = SearchBest(**summary.best.model_dump(include=set(SearchBest.model_fields)))
    top = next((c for c in summary.confirmation if c.mean is not None), None)
    by_id = {t.trial_id: t for t in summary.trials}
    view = by_id.get(top.trial_id) if top is not None else None
    if top is None or view is None or view.score is None:
        return summary.best
    answer = best_trial(spec, view, summary.tune_config(view.trial_id), summary.ranked_by or "")
    if spec.search.race is not None:
        mine = [g for g in race_groups(summary.trials, spec.mode) if view in g.trials]
        _with_race(spec, answer, mine[0] if mine else None)
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
