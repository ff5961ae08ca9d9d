"""From a spec to a Ray Tune Tuner over an RLlib algorithm."""

from __future__ import annotations

import os
from typing import Any

from ray import tune
from ray.tune import CheckpointConfig, FailureConfig, RunConfig
from ray.tune.search import BasicVariantGenerator, Searcher
from ray.tune.stopper import CombinedStopper, Stopper

from tuner.mlflow_names import RETURN_KEY
from tuner.ray_internals import forget_pending_decisions, set_restored_callbacks
from tuner.results import EVALUATION_PREFIX, lookup
from tuner.rllib import (
    CODE_KEY,
    CONFIRM_KEY,
    FINAL_EVAL_KEY,
    FLAT_DEFAULTS_KEY,
    HOLD_RATIO_KEY,
    VECTOR_ENVS_KEY,
    apply_values,
    build_config,
    code_settings,
    custom_params,
    custom_resources,
    flat_defaults_apply,
    holds_update_ratio,
    is_function,
    most_vector_envs,
    own_num_envs,
    register_env,
    sampled_values,
    trainable_for,
    user_code,
    vector_defaults_apply,
)
from tuner.search_spaces import Domain
from tuner.spec import ExperimentSpec, resolved_sampler, resolved_scheduler, scheduler_metric
from tuner.sweep._schedulers import build_scheduler
from tuner.sweep._searchers import RacingOptunaSearch, TunerOptunaSearch
from tuner.sweep._stoppers import SweepStopper
from tuner.sweep._warm import flat_point, nested_point
from tuner.tracking import Ranking, WarmStart

# Tune raises when the metric is missing from a result, but evaluation keys exist
# only on evaluating iterations and episode returns only once an episode ended.
os.environ.setdefault("TUNE_DISABLE_STRICT_METRIC_CHECKING", "1")
# Our own progress table replaces Tune's console reporter.
os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")


def trial_params(spec: ExperimentSpec) -> dict[str, Any]:
    """A trial's config dict before sampling.

    The built RLlib config, the settings that name code by import path as the spec gives
    them, and the spec's code by import path for the trial to import (CODE_KEY); for the
    spec's own training loop, its `config`, seed and env.

    Args:
        spec: The sweep's spec.

    Returns:
        The config dict.
    """
    if spec.custom_algorithm:
        return custom_params(spec)
    params = build_config(spec, env_name=register_env(spec.env, spec.wrappers)).to_dict()
    params.update(code_settings(spec))
    code = user_code(spec)
    if code:
        params[CODE_KEY] = code
    if holds_update_ratio(spec):
        params[HOLD_RATIO_KEY] = own_num_envs(spec)
    if flat_defaults_apply(spec):
        params[FLAT_DEFAULTS_KEY] = True
    if vector_defaults_apply(spec):
        params[VECTOR_ENVS_KEY] = most_vector_envs(spec)
    if spec.evaluation.at_end:
        params[FINAL_EVAL_KEY] = {
            "env_steps": spec.stop.timesteps_total,
            "iterations": spec.stop.training_iteration,
            "episodes": spec.evaluation.duration,
        }
    return params


def param_space(spec: ExperimentSpec, space: dict[str, Domain]) -> dict[str, Any]:
    """The trial config as a dict with the search domains laid over it.

    Args:
        spec: The sweep's spec.
        space: The resolved search space.

    Returns:
        Tune's param space.
    """
    return apply_values(trial_params(spec), {key: dom.to_tune() for key, dom in space.items()})


# where RLlib reports an evaluation's results
# "train": Optuna is told each trial's last training return, as Tune's OptunaSearch does
# (for A/B measurements, bench/sampler_ablation.py `told-train`)
OPTUNA_TOLD_SWITCH = "TUNER_OPTUNA_TOLD"


def final_score_key(spec: ExperimentSpec) -> str | None:
    """The result key of a trial's final deterministic evaluation where the sweep ranks
    trials by it: evaluation.at_end with a training metric (not `evaluation/...`, which
    ranks by scope as it is), one objective. None where scores are the metric under
    scope."""
    if not spec.evaluation.at_end or spec.metric.startswith(EVALUATION_PREFIX):
        return None
    if spec.objectives:  # a Pareto front weighs each objective as reported
        return None
    return f"{EVALUATION_PREFIX}{spec.metric}"


def sweep_ranking(spec: ExperimentSpec) -> Ranking:
    """How a sweep's trials are scored: the store's curves, and what Optuna is told.

    Args:
        spec: The sweep's spec.

    Returns:
        The Ranking, with the final evaluation's key where trials are ranked by it.
    """
    return Ranking.of(spec, final_key=final_score_key(spec))


def uses_optuna(spec: ExperimentSpec) -> bool:
    """Whether the sweep's trials come from an Optuna study: search.method optuna, and
    a raced random search (Optuna's RandomSampler: the race runs in the searcher).

    Args:
        spec: The sweep's spec.

    Returns:
        True where an Optuna searcher suggests the trials.
    """
    return spec.search.method == "optuna" or (
        spec.search.method == "random" and spec.search.race is not None
    )


def optuna_sampler(spec: ExperimentSpec, space: dict[str, Domain]) -> Any:
    """The Optuna sampler of an optuna sweep, seeded by the spec's seed.

    tuner.spec.resolved_sampler's; a raced random search's RandomSampler.

    Args:
        spec: The sweep's spec (search.method optuna).
        space: The resolved search space.

    Returns:
        An optuna.samplers.TPESampler or GPSampler.
    """
    import optuna

    if spec.search.method == "random":
        return optuna.samplers.RandomSampler(seed=spec.seed)
    sampler = resolved_sampler(spec, space)
    if sampler is None:
        raise ValueError(f"search.method {spec.search.method!r} has no Optuna sampler")
    if sampler.type == "gp":
        return optuna.samplers.GPSampler(seed=spec.seed, n_startup_trials=sampler.n_startup_trials)
    return optuna.samplers.TPESampler(seed=spec.seed, n_startup_trials=sampler.n_startup_trials)


def _search_alg(
    spec: ExperimentSpec, space: dict[str, Domain], warm: WarmStart | None = None
) -> Searcher | BasicVariantGenerator:
    params = trial_params(spec) if warm is not None else {}
    first = warm.first if warm is not None else []
    if uses_optuna(spec):
        objectives = [(o.metric, o.mode) for o in spec.objectives or []]
        # the earlier trials' scores are single values: a multi-objective study is told
        # none of them (their configs still run first)
        known = warm.known if warm is not None and not objectives else []
        race: dict[str, Any] = {}
        searcher: type[TunerOptunaSearch] = TunerOptunaSearch
        if spec.search.race is not None:
            searcher = RacingOptunaSearch
            race = {"race_seeds": spec.search.race.seeds, "race_ranking": sweep_ranking(spec)}
        return searcher(
            sampler=optuna_sampler(spec, space),
            points_to_evaluate=[flat_point(params, v) for v in first] or None,
            known=[(flat_point(params, v), s) for v, s in known],
            objectives=objectives,
            ranking=None if os.environ.get(OPTUNA_TOLD_SWITCH) == "train" else sweep_ranking(spec),
            intermediate=scheduler_metric(spec),
            **race,
        )
    # A SearchAlgorithm, not a Searcher: Tune ignores TuneConfig.max_concurrent_trials for it.
    return BasicVariantGenerator(
        max_concurrent=spec.max_concurrent_trials or 0,
        random_state=spec.seed,
        points_to_evaluate=[nested_point(params, v) for v in first] or None,
    )


def build_stopper(spec: ExperimentSpec) -> SweepStopper:
    """The per-trial criteria, and the sweep-wide target when stop_on_target is set."""
    criteria = spec.stop.trial_criteria()
    target = RETURN_KEY if spec.stop.stop_on_target else None
    return SweepStopper(criteria, target_key=target)


def confirm_param_space(spec: ExperimentSpec, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The param space of the confirmation stage: the fixed config, and one grid entry
    per (config, seed) to re-run ({"of": trial id, "values": {...}, "seed": n})."""
    params = trial_params(spec)
    params[CONFIRM_KEY] = tune.grid_search(runs)
    return params


def reuses_actors(spec: ExperimentSpec) -> bool:
    """Whether a trial's actor runs the sweep's next trial on the same resources (Tune's
    reuse_actors): the RLlib trainables build themselves again in place (reset_config)
    unless the spec says `reuse_actors: false`; a spec's own loop gets fresh actors, and
    so does APPO / IMPALA with a GPU Learner in the trial's own process (RLlib 2.60's
    Learner shutdown leaves its GPU loader threads running, with batches on the GPU)."""
    if not spec.reuse_actors or spec.custom_algorithm:
        return False
    r = spec.resources
    gpu_loaders = r.num_gpus_per_learner > 0 and r.num_learners == 0
    return not (gpu_loaders and spec.base_algorithm in ("APPO", "IMPALA"))


def build_tuner(
    spec: ExperimentSpec,
    space: dict[str, Domain],
    *,
    storage_path: str,
    name: str,
    callbacks: list[tune.Callback] | None = None,
    stoppers: list[Stopper] | None = None,
    confirm_runs: list[dict[str, Any]] | None = None,
    warm: WarmStart | None = None,
) -> tune.Tuner:
    """A Tuner that runs the spec's sweep over the resolved `space`.

    Its state lies under storage_path/name. With `confirm_runs`, the confirmation stage
    instead: each of those (config, seed) runs once, to the spec's per-trial stop criteria
    (no scheduler, no sweep-wide stop), each ending with a checkpoint.

    Args:
        spec: The sweep's spec.
        space: The resolved search space.
        storage_path: The Tune storage (a path or a URI).
        name: The Tune run's name.
        callbacks: Tune callbacks.
        stoppers: Tune stoppers beside the spec's own.
        confirm_runs: The confirmation stage's runs ({"of", "values", "seed"}).
        warm: The earlier sweep's trials a searcher starts from.

    Returns:
        The Tuner.
    """
    ckpt = spec.checkpoint
    confirming = confirm_runs is not None
    # a function trainable saves its own checkpoints (tune.report(checkpoint=...))
    own_checkpoints = spec.custom_algorithm and is_function(spec.algorithm)
    stopper = SweepStopper(spec.stop.trial_criteria()) if confirming else build_stopper(spec)
    run_config = RunConfig(
        name=name,
        storage_path=str(storage_path),
        stop=CombinedStopper(stopper, *stoppers) if stoppers else stopper,
        # a copy: Tune appends its own loggers to this list during fit, and a list of
        # ours that kept them (open trial files) could not be pickled by the next stage
        callbacks=list(callbacks or []),
        checkpoint_config=CheckpointConfig(
            num_to_keep=ckpt.num_to_keep,
            checkpoint_score_attribute=ckpt.score_attribute or spec.metric,
            checkpoint_score_order=spec.mode,
            checkpoint_frequency=0 if own_checkpoints else ckpt.frequency,
            checkpoint_at_end=False if own_checkpoints else ckpt.at_end or confirming,
        ),
        # a trial whose process, actor or node dies, or that raises, restarts from its last
        # checkpoint, up to max_failures times
        failure_config=FailureConfig(max_failures=spec.max_failures, fail_fast=False),
        verbose=0,
    )
    reuse = reuses_actors(spec)
    if confirming:
        tune_config = tune.TuneConfig(
            metric=spec.metric,
            mode=spec.mode,
            num_samples=1,
            search_alg=BasicVariantGenerator(max_concurrent=spec.max_concurrent_trials or 0),
            reuse_actors=reuse,
        )
        params = confirm_param_space(spec, confirm_runs)
    else:
        params = param_space(spec, space)
        search_alg = _search_alg(spec, space, warm)
        # Tune's tags count a BasicVariantGenerator's trials from 0, a Searcher's from 1
        first_count = 0 if isinstance(search_alg, BasicVariantGenerator) else 1
        tune_config = tune.TuneConfig(
            metric=spec.metric,
            mode=spec.mode,
            num_samples=spec.search.num_samples,
            search_alg=search_alg,
            scheduler=build_scheduler(
                resolved_scheduler(spec, space),
                space,
                params,
                first_count=first_count,
                judged_on=scheduler_metric(spec),
            ),
            max_concurrent_trials=spec.max_concurrent_trials if uses_optuna(spec) else None,
            time_budget_s=spec.stop.time_budget_s,
            reuse_actors=reuse,
        )
    return tune.Tuner(
        _with_resources(spec),
        param_space=params,
        tune_config=tune_config,
        run_config=run_config,
    )


def _with_resources(spec: ExperimentSpec) -> Any:
    """The trainable; the spec's own training loop with its resources (an RLlib
    algorithm requests its placement group itself)."""
    trainable = trainable_for(spec)
    if not spec.custom_algorithm:
        return trainable
    res = custom_resources(spec)
    return tune.with_resources(trainable, {"cpu": res["CPU"], "gpu": res.get("GPU", 0)})


def restore_tuner(
    spec: ExperimentSpec,
    space: dict[str, Domain],
    path: str,
    callbacks: list[tune.Callback] | None = None,
    confirm_runs: list[dict[str, Any]] | None = None,
) -> tune.Tuner:
    """Continues an interrupted sweep from Tune's experiment state at `path`.

    The param space is passed again so that Tune re-resolves the objects (classes)
    of the RLlib config that its saved state only references.
    """
    # a trial that failed while saving must not be stopped after one iteration of its retry
    forget_pending_decisions(path)
    tuner = tune.Tuner.restore(
        path,
        trainable=_with_resources(spec),
        param_space=param_space(spec, space)
        if confirm_runs is None
        else confirm_param_space(spec, confirm_runs),
        resume_unfinished=True,
        # errored trials are retried from their last checkpoints; their failure count
        # carries over (one more failure ends them again)
        resume_errored=True,
        restart_errored=False,
    )
    if callbacks:
        # Tune restores its RunConfig from the pickled state; fresh callbacks (which
        # find their MLflow runs again by tag) replace the pickled ones.
        set_restored_callbacks(tuner, list(callbacks))  # a copy, as above
    return tuner


__all__ = ["build_tuner", "restore_tuner", "sampled_values", "param_space", "lookup"]
