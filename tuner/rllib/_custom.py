"""Your own training loop as a sweep's algorithm: `algorithm: "package.module:name"`.

`name` is one of
- a Tune `Trainable` subclass (step / save_checkpoint / load_checkpoint): Tune runs it
  as it is; checkpoints follow the spec's `checkpoint` settings;
- a function taking the config that calls `ray.tune.report(metrics)` each iteration
  (and `tune.report(metrics, checkpoint=...)` / `tune.get_checkpoint()` to save and
  resume, as any Tune function trainable);
- a generator function taking the config that yields a dict of metrics per iteration
  (a hand-written trainer yielding its log data); it has no checkpoints.

Every kind gets the spec's `config` with the sampled values laid in, `seed` (the trial's
own, as for RLlib trials) and, when the spec names one, `env` and `env_config`. The
import path was checked against the operator's allowed modules before this module
imports it (the driver and each trial process only).
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from typing import Any

from ray import tune
from ray.tune.result import TRIAL_INFO

from tuner.rllib._envs import load_object
from tuner.rllib._trial_config import (
    CONFIRM_KEY,
    INDEX_KEY,
    search_index,
    seeded_config,
    trial_seed,
)
from tuner.spec import ExperimentSpec

KINDS = ("Trainable subclass", "function", "generator function")


def kind_of(obj: Any) -> str | None:
    """Which kind of training loop `obj` is.

    Args:
        obj: What a spec's `algorithm` import path names.

    Returns:
        One of KINDS, or None if none.
    """
    module = (getattr(obj, "__module__", None) or "").split(".")[0]
    if module in sys.stdlib_module_names or module == "builtins":
        return None
    if inspect.isclass(obj):
        return KINDS[0] if issubclass(obj, tune.Trainable) else None
    if inspect.isgeneratorfunction(obj):
        return KINDS[2]
    if inspect.isfunction(obj):
        return KINDS[1]
    return None


def is_function(path: str) -> bool:
    """Whether the training loop at `path` is a function.

    A function is Tune's function trainable, which takes no checkpoint settings: it saves
    its own.

    Args:
        path: The training loop's import path.

    Returns:
        True for a function.
    """
    return kind_of(load_object(path)) in KINDS[1:]


def _seeded(config: dict[str, Any]) -> dict[str, Any]:
    """seeded_config for a function trainable, whose config no longer holds Tune's
    TRIAL_INFO (the trial id comes from Tune's context instead)."""
    if isinstance(config.get(CONFIRM_KEY), dict) or config.get(TRIAL_INFO) is not None:
        return seeded_config(config)
    trial_id = tune.get_context().get_trial_id()
    if trial_id is None:
        return config
    # a searcher's trial: the index it set (INDEX_KEY), as seed_of records it
    seed = trial_seed(int(config.get("seed") or 0), search_index(config, trial_id))
    return {**{k: v for k, v in config.items() if k != INDEX_KEY}, "seed": seed}


def _run_function(path: str, config: dict[str, Any]) -> None:
    obj = load_object(path)
    config = _seeded(config)
    if inspect.isgeneratorfunction(obj):
        for metrics in obj(config):
            if not isinstance(metrics, dict):
                raise TypeError(f"{path} yielded {type(metrics).__name__}, not a dict of metrics")
            tune.report(dict(metrics))
        return
    obj(config)


def custom_trainable(path: str) -> Callable[..., Any] | type[tune.Trainable]:
    """The trainable Tune runs for the training loop at `path` (imports it)."""
    obj = load_object(path)
    kind = kind_of(obj)
    name = path.rpartition(":")[2]
    if kind == KINDS[0]:

        class Seeded(obj):  # type: ignore[misc, valid-type]
            def __init__(self, config: dict[str, Any] | None = None, **kwargs: Any) -> None:
                super().__init__(seeded_config(config or {}), **kwargs)

        Seeded.__name__ = Seeded.__qualname__ = name
        return Seeded
    if kind is None:
        raise TypeError(f"{path} is neither a Tune Trainable subclass nor a function")

    def trainable(config: dict[str, Any]) -> None:
        _run_function(path, config)

    trainable.__name__ = trainable.__qualname__ = name
    return trainable


def custom_params(spec: ExperimentSpec) -> dict[str, Any]:
    """A custom training loop's config before sampling.

    The spec's `config`, its seed, and the env when the spec names one.

    Args:
        spec: The sweep's spec.

    Returns:
        The config dict.
    """
    params: dict[str, Any] = {**spec.config, "seed": spec.seed}
    if spec.env is not None:
        params["env"] = spec.env
        params["env_config"] = dict(spec.env_config)
    return params


def custom_resources(spec: ExperimentSpec) -> dict[str, float]:
    """One trial's resources: the main process's CPUs, and a learner's GPUs.

    Args:
        spec: The sweep's spec.

    Returns:
        The resources, by Ray's names.
    """
    r = spec.resources
    out = {"CPU": float(r.num_cpus_for_main_process)}
    if r.num_gpus_per_learner:
        out["GPU"] = float(r.num_gpus_per_learner)
    return out
