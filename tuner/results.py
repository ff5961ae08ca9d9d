"""Reading a Tune result and ranking metric values: a flattened key looked up in a
nested result, which of two values is better under a mode, and a trial's ranking value
from its metric history under `scope`, and the Pareto front of several objectives. Plain
functions: every layer reads results so."""

from __future__ import annotations

import math
import numbers
from typing import Any

_MISSING = object()
EVALUATION_PREFIX = "evaluation/"  # RLlib's prefix of every evaluation result key


def training_metric(metric: str) -> str:
    """The training episodes' counterpart of a result key: an evaluation key without
    `evaluation/` ('evaluation/env_runners/episode_return_mean' ->
    'env_runners/episode_return_mean'); a training key as it is."""
    return metric.removeprefix(EVALUATION_PREFIX)


def lookup(result: dict[str, Any], key: str) -> Any:
    """A flattened key ('env_runners/episode_return_mean') in a nested or flat result.
    A part matches a key as Tune flattens it, by str(): an env's agent ids may be ints
    ('env_runners/agent_episode_returns_mean/0')."""
    if key in result:
        return result[key]
    node: Any = result
    for part in key.split("/"):
        if not isinstance(node, dict):
            return None
        if part in node:
            node = node[part]
            continue
        node = next((v for k, v in node.items() if str(k) == part), _MISSING)
        if node is _MISSING:
            return None
    return node


def better(a: float, b: float | None, mode: str) -> bool:
    """Whether metric value a beats b under mode ('max' or 'min')."""
    return b is None or (a > b if mode == "max" else a < b)


def search_rank(
    score: float | None, train_score: float | None, seed: int | None, trial_id: str, mode: str
) -> tuple[Any, ...]:
    """A search trial's place, best first, as a sort key (the least is the best): by its
    `score`; a tie (a task whose score saturates, CartPole's 500) by its `train_score`,
    the training return: of two configs whose deterministic policy plays alike, the one
    whose exploring policy also does; then the one the searcher suggested first (its seed
    is the spec's seed plus that place), then its trial id. A missing or non-finite value
    comes after every number.

    Args:
        score: The trial's score.
        train_score: Its training metric under scope.
        seed: Its seed.
        trial_id: Tune's trial id (random for a searcher's trials: the last resort only).
        mode: max or min.

    Returns:
        The key.
    """
    sign = -1.0 if mode == "max" else 1.0

    def number(value: float | None) -> tuple[bool, float]:
        finite = value is not None and math.isfinite(value)
        return (not finite, sign * value if finite else 0.0)

    return (*number(score), *number(train_score), seed is None, seed or 0, trial_id)


def scope_value(values: list[float], scope: str, mode: str) -> float | None:
    """A trial's ranking value from its metric history (carried over iterations without
    an episode, in order), under Tune's scope names: last, last-5-avg, last-10-avg, avg,
    or all (the peak)."""
    # numbers.Real: Tune's history (progress.csv) gives a whole-number column as numpy int64
    finite = [
        float(v)
        for v in values
        if isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v)
    ]
    if not finite:
        return None
    if scope == "last":
        return finite[-1]
    if scope.startswith("last-") and scope.endswith("-avg"):
        window = finite[-int(scope.split("-")[1]) :]
        return sum(window) / len(window)
    if scope == "avg":
        return sum(finite) / len(finite)
    return max(finite) if mode == "max" else min(finite)


def retries_of(failures: int, errored: bool) -> int:
    """How many times a trial was restarted after a failure: Tune's failure count
    (`Trial.num_failures`), less the last failure of a trial that ended in ERROR (that
    one was not retried)."""
    return max(int(failures or 0) - (1 if errored else 0), 0)


def dominates(a: list[float], b: list[float], modes: list[str]) -> bool:
    """Whether a Pareto-dominates b: at least as good on every objective (mode 'max' or
    'min' each) and better on one."""
    pairs = list(zip(a, b, modes, strict=True))
    at_least = all(x >= y if m == "max" else x <= y for x, y, m in pairs)
    return at_least and any(x != y for x, y, _ in pairs)


def pareto_front(points: list[list[float]], modes: list[str]) -> list[int]:
    """The indices of the points no other point dominates (equal points all stay), in
    the points' order."""
    return [
        i
        for i, p in enumerate(points)
        if not any(dominates(q, p, modes) for j, q in enumerate(points) if j != i)
    ]
