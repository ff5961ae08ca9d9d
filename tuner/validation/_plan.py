"""What a spec will cost before it runs: trials, one trial's placement group, how many
run at once on the target cluster and what limits that, the most env steps, iterations
and time its stop criteria allow, and whether it fits (`tuner plan`, `POST
/experiments?dry_run=true`)."""

from __future__ import annotations

import math
from typing import Any

from tuner.rllib import check_fits, trial_resources, trial_seed, vector_defaults_apply
from tuner.search_spaces import Domain
from tuner.spec import (
    ExperimentSpec,
    SpecError,
    resolve_space,
    sampler_in_force,
    scheduler_in_force,
    search_trials,
)
from tuner.views import Issue, Plan


def _place(bundles: list[dict[str, float]], free: list[dict[str, float]]) -> str | None:
    """Places one trial's bundles on the nodes' free resources (first fit, in place);
    None when placed, else the resource that ran out."""
    trial = [dict(n) for n in free]
    for bundle in bundles:
        node = next(
            (n for n in trial if all(v <= n.get(k, 0.0) + 1e-9 for k, v in bundle.items())),
            None,
        )
        if node is None:
            worst = max(
                bundle,
                key=lambda k: bundle[k] - max((n.get(k, 0.0) for n in trial), default=0.0),
            )
            return worst
        for k, v in bundle.items():
            node[k] = node.get(k, 0.0) - v
    free[:] = trial
    return None


def concurrency(
    bundles: list[dict[str, float]], nodes: list[dict[str, float]], cap: int
) -> tuple[int, str]:
    """How many trials' placement groups fit on the nodes at once (at most `cap`), and
    what limits it: a resource name, or `trials` / `max_concurrent_trials`."""
    free = [dict(n) for n in nodes]
    placed = 0
    while placed < cap:
        short = _place(bundles, free)
        if short is not None:
            return placed, short
        placed += 1
    return placed, "cap"


def plan_spec(
    spec: ExperimentSpec,
    nodes: list[dict[str, float]] | None,
    *,
    check_fit: bool = True,
    space: dict[str, Domain] | None = None,
) -> Plan:
    """The plan of a validated spec: what it will cost before it runs.

    Trials, one trial's placement group, how many run at once on `nodes` and what
    limits that, the most env steps, iterations and time its stop criteria allow, and
    whether one trial fits.

    Args:
        spec: A spec that passed `validate_spec`.
        nodes: Each node's total resources; None: not known (no concurrency, no fit
            check).
        check_fit: Whether to check that one trial fits the nodes.
        space: The resolved search space (`tuner.spec.resolve_space`, the one
            validation used); resolved here when not given.

    Returns:
        The plan; a trial that does not fit is `fits=False` with its `problems`.
    """
    space = resolve_space(spec) if space is None else space
    trials = search_trials(spec, space)
    confirm = spec.confirm.top_k * spec.confirm.seeds if spec.confirm else 0
    total, bundles = trial_resources(spec)
    problems: list[Issue] = []
    fits = True
    if nodes is not None and check_fit:
        try:
            check_fits(spec, nodes)
        except SpecError as err:
            fits = False
            problems += err.issues
    concurrent, limited_by = None, None
    if nodes is not None:
        cap = min(trials, spec.max_concurrent_trials or trials)
        concurrent, short = concurrency(bundles, nodes, cap)
        if short == "cap":
            limited_by = (
                "max_concurrent_trials"
                if spec.max_concurrent_trials and (spec.max_concurrent_trials < trials)
                else "trials"
            )
        else:
            limited_by = short
    stop = spec.stop
    runs = trials + confirm
    waves = math.ceil(runs / concurrent) if concurrent else None
    return Plan(
        trials=trials,
        confirm_trials=confirm,
        # CPU and GPU always (0 included), then any custom resources
        per_trial={"CPU": total.get("CPU", 0.0), "GPU": total.get("GPU", 0.0)} | total,
        bundles=bundles,
        concurrent=concurrent,
        limited_by=limited_by,
        max_env_steps=stop.timesteps_total * runs if stop.timesteps_total else None,
        max_iterations=stop.training_iteration * runs if stop.training_iteration else None,
        max_time_s=stop.time_budget_s
        or (stop.time_total_s * waves if stop.time_total_s and waves else None),
        fits=fits,
        problems=problems,
        search_keys=sorted(space),
        base_settings=base_in_force(spec),
        scheduler=scheduler_in_force(spec, space),
        sampler=sampler_in_force(spec, space),
        race=race_in_force(spec),
    )


# how a raced search spends its trials (Plan.race, the docs' "Racing over seeds")
RACE_RULE = (
    "a config runs its next seed while its mean score is at least the best fully raced "
    "config's mean (before any is, one trailing the best mean over the same seeds waits "
    "for it); configs rank by their mean over the most seeds any config ran"
)


def race_in_force(spec: ExperimentSpec) -> dict[str, Any] | None:
    """search.race as the plan shows it: the seeds a config may run on and the rule.

    Args:
        spec: The sweep's spec.

    Returns:
        {"seeds", "rule"}, or None without a race.
    """
    if spec.search.race is None:
        return None
    seeds = [trial_seed(spec.seed, i) for i in range(spec.search.race.seeds)]
    return {"seeds": seeds, "rule": RACE_RULE}


def base_in_force(spec: ExperimentSpec) -> dict[str, Any]:
    """The env's base settings the spec's trials take (where it sets none), with their
    source; {} where none applies."""
    base = spec.base
    out: dict[str, Any] = {}
    if spec.normalize_observations is None and spec.observations_normalized:
        out["normalize_observations"] = True
    envs = base.num_envs_per_env_runner
    if envs is not None and vector_defaults_apply(spec):
        out["num_envs_per_env_runner"] = envs
    if out:
        out["source"] = f"rl_zoo3 hyperparams/{base.source}"
    return out
