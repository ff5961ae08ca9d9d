"""A warm start (`search.warm_start`): the earlier sweep, read back from MLflow, where
every sweep lands whether the service or `tuner run` ran it (its parent run, its spec,
spec.yaml, and its trials, trials.json); and its finished trials mapped onto this sweep's
space by key name. Its best `top_k` configs run first; with optuna, every finished trial
of the same algorithm and metric is told to the sampler with its score. Keys this space
does not search, and values outside its ranges, are dropped and said."""

from __future__ import annotations

import json
import os
from typing import Any

from pydantic import BaseModel, Field

from tuner import mlflow_names as names
from tuner.mlflow_names import STAGE_SEARCH
from tuner.rllib import round_robin_excess
from tuner.search_spaces import UPDATES_PER_ENV_STEP, Domain
from tuner.seed_stats import race_groups
from tuner.spec import ExperimentSpec, SpecError, parse_spec
from tuner.statuses import TrialStatus
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
    """The sweep `source` names.

    A sweep id or run name (its parent run's tuner.run tag), or a sweep name (its MLflow
    experiment: the latest sweep there that finished).

    Args:
        tracking_uri: The MLflow tracking URI.
        source: The spec's `search.warm_start.from`.

    Returns:
        The earlier sweep.

    Raises:
        SpecError: (on search.warm_start.from) naming what is missing.
    """
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


class WarmStart(BaseModel):
    """What a sweep reuses of an earlier one."""

    source: str = Field(..., description="The earlier sweep's run name.")
    parent_run_id: str
    first: list[dict[str, Any]] = Field(
        default_factory=list, description="The configs that run first (space keys)."
    )
    known: list[tuple[dict[str, Any], float]] = Field(
        default_factory=list, description="(config, score) told to Optuna."
    )
    warnings: list[str] = Field(default_factory=list)


def _ranked(done: list[Any], mode: str, *, raced: bool) -> list[tuple[dict[str, Any], float]]:
    """(config, score), best first: each trial with its score; of a raced sweep each
    config once, with its seeds' mean, ranked as its answer ranks them (race_groups)."""
    if not raced:
        ranked = sorted(done, key=lambda t: t.score, reverse=mode == "max")  # stable
        return [(t.config, float(t.score)) for t in ranked]
    groups = race_groups(done, mode)
    return [(g.trials[0].config, float(g.mean)) for g in groups if g.mean is not None]


def warm_start(spec: ExperimentSpec, space: dict[str, Domain], earlier: EarlierSweep) -> WarmStart:
    """The earlier sweep's finished search trials, best first, mapped onto `space`.

    Args:
        spec: The sweep's spec.
        space: The resolved search space.
        earlier: The earlier sweep (find_earlier_sweep).

    Returns:
        The WarmStart.
    """
    ws = spec.search.warm_start
    assert ws is not None
    loc = "search.warm_start.from"
    if earlier.spec.base_algorithm != spec.base_algorithm:
        raise SpecError.one(
            loc,
            f"sweep {ws.from_!r} ran {earlier.spec.algorithm}, this one "
            f"{spec.algorithm}: a warm start reuses a sweep of the same algorithm",
            ws.from_,
        )
    out = WarmStart(source=earlier.run_name, parent_run_id=earlier.parent_run_id)
    if earlier.spec.env != spec.env:
        out.warnings.append(
            f"warm start from {ws.from_!r}: it ran on {earlier.spec.env}, this sweep on "
            f"{spec.env}; its configs are reused, its scores are of the other env"
        )
    mode = earlier.spec.mode
    done = [
        t
        for t in earlier.trials
        if t.stage == STAGE_SEARCH and t.status == TrialStatus.TERMINATED and t.score is not None
    ]
    dropped: dict[str, str] = {}
    mapped: list[tuple[dict[str, Any], float]] = []
    for config, score in _ranked(done, mode, raced=earlier.spec.search.race is not None):
        values = {}
        for key, value in _with_ratio(config, earlier.spec, space).items():
            dom = space.get(key)
            if dom is None:
                dropped[key] = "not searched here"
            elif not dom.contains(value):
                dropped[key] = f"a value outside {dom}"
            else:
                values[key] = value
        mapped.append((values, score))
    filled: set[str] = set()
    for values, _ in mapped:
        # Tune's searchers take whole points: a key it lacks takes this space's middle
        whole = {**{k: middle(d) for k, d in space.items() if k not in values}, **values}
        if values and whole not in out.first and len(out.first) < ws.top_k:
            filled |= set(space) - set(values)
            out.first.append(whole)
    same_goal = (earlier.spec.metric, mode) == (spec.metric, spec.mode)
    if spec.search.method == "optuna" and same_goal:
        out.known = [(v, s) for v, s in mapped if set(v) == set(space)]
    if dropped:
        each = ", ".join(f"{k} ({why})" for k, why in sorted(dropped.items()))
        out.warnings.append(f"warm start from {ws.from_!r}: dropped {each}")
    if filled:
        out.warnings.append(
            f"warm start from {ws.from_!r}: {', '.join(sorted(filled))} set to the middle "
            "of this space where an earlier config has none"
        )
    out.warnings.append(
        f"warm start from {ws.from_!r} (run {earlier.run_name}): {len(out.first)} of its "
        f"{len(done)} finished configs run first"
        + (f", {len(out.known)} told to Optuna with their scores" if out.known else "")
        + ("" if same_goal else f" (it ranked by {earlier.spec.metric}: no scores reused)")
    )
    return out


def _with_ratio(
    config: dict[str, Any], earlier: ExperimentSpec, space: dict[str, Domain]
) -> dict[str, Any]:
    """An earlier config's searched training_intensity as the updates_per_env_step this
    space searches instead (DQN's default space before and after it searched the ratio
    apart from the batch): the samples its intensity trained per env step (with remote
    env runners more than itself: round_robin_excess) / the earlier trial's train batch of
    all learners, where its batch is known (sampled, or fixed in its spec). Else the
    config as it is."""
    if UPDATES_PER_ENV_STEP not in space or "training_intensity" in space:
        return config
    batch_key = "train_batch_size_per_learner"
    intensity = config.get("training_intensity")
    batch = config.get(batch_key, earlier.config.get(batch_key))
    if not (_positive(intensity) and _positive(batch)) or UPDATES_PER_ENV_STEP in config:
        return config
    learners = max(earlier.resources.num_learners or 0, 1)
    trained = intensity * round_robin_excess(earlier.resources.num_env_runners)
    out = {k: v for k, v in config.items() if k != "training_intensity"}
    out[UPDATES_PER_ENV_STEP] = trained / (batch * learners)
    return out


def _positive(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value > 0


def middle(dom: Domain) -> Any:
    """A value in the middle of a domain: the middle choice; the midpoint of a range (in
    log space for loguniform; rounded for randint and quniform)."""
    import math

    kind, args = dom.kind, dom.args
    if kind in ("choice", "grid"):
        return args[len(args) // 2]
    low, high = args[0], args[1]
    if kind == "loguniform":
        return math.exp((math.log(low) + math.log(high)) / 2)
    mid = (low + high) / 2
    if kind == "randint":
        return int(round(mid))
    if kind == "quniform":
        return round(mid / args[2]) * args[2]
    return mid


__all__ = ["EarlierSweep", "WarmStart", "find_earlier_sweep", "middle", "warm_start"]
