"""The confirmation stage: the search's top configs re-run on fresh seeds, each seed
scored by its final deterministic evaluation, and the answer taken from their means."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from ray import tune
from ray.tune.stopper import Stopper

from tuner.mlflow_names import STAGE_SEARCH
from tuner.rllib import evaluate_checkpoint
from tuner.spec import ExperimentSpec
from tuner.statuses import SweepStatus, TrialStatus
from tuner.sweep._confirm import confirm_runs, confirm_seeds, confirmed_configs, pick_candidates
from tuner.sweep._graceful import signal_handlers_restored
from tuner.sweep._interrupt import InterruptWatch
from tuner.sweep._pareto import confirmed_values
from tuner.sweep._summary import summarise, the_answer
from tuner.sweep._tuner import build_tuner, restore_tuner
from tuner.tune_paths import confirm_run, run_dir, with_scheme
from tuner.views import SweepSummary, TrialView

logger = logging.getLogger(__name__)


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


def run_confirmation(
    spec: ExperimentSpec,
    summary: SweepSummary,
    storage_path: str,
    name: str,
    callbacks: Sequence[tune.Callback],
    stoppers: Sequence[Stopper],
) -> None:
    """Runs (or continues) the confirmation stage of a finished search and adds its
    trials, the confirmed configs and the answer (`best`) to `summary` (STOPPED if it was
    interrupted: a resume continues it without re-running the search). `callbacks`: the
    search's own (the user's, MLflow, progress); the stage watches its own interrupts."""
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
    with signal_handlers_restored():
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
