"""How much each sampled hyperparameter mattered for the metric, whatever the search method.

The finished trials of a sweep become an Optuna study (one completed trial each, with the
distributions of the sweep's search space), and Optuna's importance evaluators rank the
keys:

- ``fanova`` (the sweep's ``importance``): fANOVA (Hutter et al. 2014) fits a random
  forest to value ~ config and gives each key the share of the value's variance that its
  marginal explains over the whole space.
- ``ped_anova`` (``importance_ped_anova``): PED-ANOVA (Watanabe et al. 2023) compares
  each key's distribution among the best trials with its distribution among all of them:
  what it takes to reach the top.

Each result is {key: share}, largest first, summing to 1; keys whose sampled value never
changed get 0. Deterministic (fixed seeds, sorted ties) and cheap: a small forest, about a
fifth of Optuna's default CPU (bench/importance_cost.py). Optuna is imported only when
there is something to evaluate; Ray never.

Mapping the space (tuner.search_spaces.Domain): choice and grid are categorical (every
value by its canonical JSON text, so lists and dicts work); uniform, randint and quniform
(with its step when the sampled values lie on it) are numeric; loguniform enters on a
log10 scale, because Optuna's fANOVA integrates over the raw range and would weigh only
the top decade of a log-sampled key. Bounds widen to any sampled value outside them.
"""

from __future__ import annotations

import json
import logging
import math
import warnings
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tuner.mlflow_names import STAGE_SEARCH
from tuner.statuses import TrialStatus

EVALUATORS: tuple[str, ...] = ("fanova", "ped_anova")
MIN_TRIALS = 4
# a smaller forest than Optuna's defaults (64 trees, depth 64): the live importance is
# recomputed as trials finish, and these rank hyperparameters as the defaults do at a
# fraction of the CPU (bench/importance_cost.py, docs/benchmarks.md)
FANOVA_TREES, FANOVA_DEPTH, SEED = 16, 8, 0
# PED-ANOVA's "top": the best 10 % of the trials, but at least 5 of them (its authors'
# advice), and at most half.
PED_ANOVA_TOP, PED_ANOVA_MIN_TOP = 0.1, 5
DIGITS = 6
# the fields of SweepSummary / ExperimentView each evaluator's result goes in
FIELDS: dict[str, str] = {"fanova": "importance", "ped_anova": "importance_ped_anova"}
_KINDS = ("grid", "choice", "uniform", "loguniform", "randint", "quniform")


def importances(
    trials: Iterable[Any],
    space: Mapping[str, Any],
    mode: str,
    *,
    min_trials: int = MIN_TRIALS,
    value: str = "score",
    evaluators: Sequence[str] = EVALUATORS,
) -> dict[str, dict[str, float]] | None:
    """Per evaluator (``fanova``, ``ped_anova``), the importance of each key of `space`.

    `trials`: TrialViews, or mappings with ``config`` and the value fields; those with a
    finite value count as finished (`value`: ``score``, falling back to ``best_metric``
    where a trial has none, or ``best_metric``). `space`: key -> Domain (or its written
    form; a key whose domain is None or unknown is left out). `mode`: max or min.

    None with fewer than `min_trials` finished trials, fewer than two distinct values,
    or no key whose sampled value changed.
    """
    if mode not in ("max", "min"):
        raise ValueError(f"mode must be max or min, got {mode!r}")
    unknown = set(evaluators) - set(EVALUATORS)
    if unknown or not evaluators:
        raise ValueError(f"evaluators are {', '.join(EVALUATORS)}; got {sorted(unknown)}")
    if value not in ("score", "best_metric"):
        raise ValueError(f"value must be score or best_metric, got {value!r}")
    domains = {k: d for k, d in ((k, _domain(d)) for k, d in space.items()) if d is not None}
    rows = _rows(trials, domains, value)
    if len(rows) < max(min_trials, 2) or len({v for _, v in rows}) < 2:
        return None
    columns = {key: [params[key] for params, _ in rows] for key in domains}
    # (a quniform key's values are snapped onto its grid in place)
    dists = {key: _distribution(domains[key], values) for key, values in columns.items()}
    for i, (params, _) in enumerate(rows):
        params.update({key: values[i] for key, values in columns.items()})
    varying = sorted(k for k, values in columns.items() if len(set(values)) > 1)
    if not varying:
        return None
    out: dict[str, dict[str, float]] = {}
    study = _study(rows, {k: dists[k] for k in varying}, mode)
    for name in evaluators:
        shares = _evaluate(study, name, varying, len(rows))
        shares.update({k: 0.0 for k in domains if k not in shares})
        out[name] = dict(sorted(shares.items(), key=lambda kv: (-kv[1], kv[0])))
    return out


def importance(
    trials: Iterable[Any],
    space: Mapping[str, Any],
    mode: str,
    *,
    min_trials: int = MIN_TRIALS,
    evaluator: str = "fanova",
    value: str = "score",
) -> dict[str, float] | None:
    """{key: importance} by one evaluator (fanova or ped_anova), largest first, summing to
    1; None when there is not enough to say. See `importances`."""
    both = importances(
        trials, space, mode, min_trials=min_trials, value=value, evaluators=(evaluator,)
    )
    return None if both is None else both[evaluator]


def sweep_importance(
    trials: Iterable[Any],
    space: Mapping[str, Any],
    mode: str,
    *,
    min_trials: int = MIN_TRIALS,
    value: str = "score",
) -> dict[str, dict[str, float]]:
    """A sweep's `importance` and `importance_ped_anova` fields over its finished search
    trials (stage search, status TERMINATED): both empty when there is not enough to say.
    The driver's summary ranks by `score`; the live store by `best_metric`."""
    finished = [
        t
        for t in trials
        if (_field(t, "stage") or STAGE_SEARCH) == STAGE_SEARCH
        and _field(t, "status") == TrialStatus.TERMINATED
    ]
    both = importances(finished, space, mode, min_trials=min_trials, value=value) or {}
    return {field: both.get(name, {}) for name, field in FIELDS.items()}


# --- trials and domains ------------------------------------------------------------------


def _field(trial: Any, name: str) -> Any:
    if isinstance(trial, Mapping):
        return trial.get(name)
    return getattr(trial, name, None)


def _finite(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, int | float):
        return None
    return float(x) if math.isfinite(x) else None


def _value(trial: Any, value: str) -> float | None:
    if value == "score":
        score = _finite(_field(trial, "score"))
        if score is not None:
            return score
    return _finite(_field(trial, "best_metric"))


def _domain(domain: Any) -> Any:
    """A Domain (validated from its written form if need be), or None."""
    if domain is None:
        return None
    if isinstance(domain, Mapping):
        from tuner.search_spaces import Domain

        try:
            return Domain.model_validate(dict(domain))
        except ValueError:
            return None
    return domain if getattr(domain, "kind", None) in _KINDS else None


def _canonical(v: Any) -> Any:
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return v
    if isinstance(v, int | float):
        return float(v)  # 1 and 1.0 are one category
    if isinstance(v, Mapping):
        return {str(k): _canonical(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_canonical(x) for x in v]
    return str(v)


def category(v: Any) -> str:
    """The category a choice or grid value has in the study: its canonical JSON text."""
    return json.dumps(_canonical(v), sort_keys=True, separators=(",", ":"))


def _internal(domain: Any, v: Any) -> Any:
    """The value of one key in the study, or None when it cannot be one of the domain's."""
    kind = domain.kind
    if kind in ("grid", "choice"):
        return category(v)
    x = _finite(v)
    if x is None:
        return None
    if kind == "loguniform":
        return math.log10(x) if x > 0 else None
    if kind == "randint":
        return int(x) if x.is_integer() else None
    return x


def _rows(
    trials: Iterable[Any], domains: Mapping[str, Any], value: str
) -> list[tuple[dict, float]]:
    """(params, value) of each finished trial that has a usable value for every key."""
    rows = []
    for trial in trials:
        y = _value(trial, value)
        config = _field(trial, "config") or {}
        if y is None or not all(k in config for k in domains):
            continue
        params = {k: _internal(d, config[k]) for k, d in domains.items()}
        if all(p is not None for p in params.values()):
            rows.append((params, y))
    # the same trials in any order give the same study (the forest's bootstrap follows it)
    rows.sort(key=lambda row: (row[1], json.dumps(row[0], sort_keys=True)))
    return rows


def _distribution(domain: Any, values: list[Any]) -> Any:
    """The Optuna distribution of one key, covering every value the trials took."""
    from optuna.distributions import (
        CategoricalDistribution,
        FloatDistribution,
        IntDistribution,
    )

    kind, args = domain.kind, domain.args
    if kind in ("grid", "choice"):
        choices = list(dict.fromkeys(category(c) for c in args))
        choices += sorted(set(values) - set(choices))
        return CategoricalDistribution(choices)
    low, high = args[0], args[1]
    if kind == "loguniform":
        low, high = math.log10(low), math.log10(high)
    low, high = min(low, *values), max(high, *values)
    if kind == "randint":
        return IntDistribution(int(low), int(high))
    if kind == "quniform":
        stepped = _stepped(args[0], args[1], args[2], values)
        if stepped is not None:
            return stepped
    return FloatDistribution(low, high)


def _stepped(low: float, high: float, q: float, values: list[float]) -> Any:
    """FloatDistribution(step=q) when every value lies on its grid, else None. Tune rounds
    quniform samples to multiples of q, which are on the grid only when low is one too."""
    from optuna.distributions import FloatDistribution

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Optuna warns when it lowers high onto the grid
        dist = FloatDistribution(low, high, step=q)
    for v in values:
        k = (v - dist.low) / q
        if abs(k - round(k)) > 1e-6 or not dist.low - 1e-9 <= v <= dist.high + 1e-9:
            return None
    for i, v in enumerate(values):  # exactly on the grid, as Optuna checks it
        values[i] = min(max(dist.low + round((v - dist.low) / q) * q, dist.low), dist.high)
    return dist


# --- the study -----------------------------------------------------------------------------


def _study(rows: list[tuple[dict, float]], dists: dict[str, Any], mode: str) -> Any:
    import optuna

    quiet = logging.getLogger("optuna.storages._in_memory")  # "A new study created ..."
    level = quiet.level
    quiet.setLevel(logging.WARNING)
    try:
        study = optuna.create_study(
            direction="maximize" if mode == "max" else "minimize",
            sampler=optuna.samplers.RandomSampler(seed=SEED),
        )
    finally:
        quiet.setLevel(level)
    study.add_trials(
        [
            optuna.trial.create_trial(
                params={k: params[k] for k in dists}, distributions=dists, value=y
            )
            for params, y in rows
        ]
    )
    return study


def _evaluate(study: Any, name: str, params: list[str], n: int) -> dict[str, float]:
    from optuna.importance import (
        FanovaImportanceEvaluator,
        PedAnovaImportanceEvaluator,
        get_param_importances,
    )

    if name == "fanova":
        evaluator: Any = FanovaImportanceEvaluator(
            n_trees=FANOVA_TREES, max_depth=FANOVA_DEPTH, seed=SEED
        )
    else:
        top = min(0.5, max(PED_ANOVA_TOP, PED_ANOVA_MIN_TOP / n))
        evaluator = PedAnovaImportanceEvaluator(target_quantile=top)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # few trials per regime, experimental flags
        shares = get_param_importances(study, evaluator=evaluator, params=params)
    total = sum(max(float(v), 0.0) for v in shares.values())
    if not total > 0:
        return {k: 0.0 for k in params}
    return {k: round(max(float(v), 0.0) / total, DIGITS) for k, v in shares.items()}


__all__ = [
    "EVALUATORS",
    "FIELDS",
    "MIN_TRIALS",
    "category",
    "importance",
    "importances",
    "sweep_importance",
]
