"""A warm start's configs as Tune's searchers take them (tuner.tracking.warm_start maps
the earlier sweep's trials onto this sweep's space)."""

from __future__ import annotations

from typing import Any

from tuner.rllib import apply_values, config_path


def flat_point(params: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """A config of space keys as Tune's searchers take a point: the flattened path of
    each key in the trial's config dict `params` ("_model_config/fcnet_hiddens")."""
    laid = apply_values(params, values)
    out = {}
    for key in values:
        path = config_path(key, params)
        node: Any = laid
        for part in path:
            node = node[part]
        out["/".join(path)] = node
    return out


def nested_point(params: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """The same as a nested dict (Tune's BasicVariantGenerator takes that)."""
    out: dict[str, Any] = {}
    for flat, value in flat_point(params, values).items():
        node = out
        *parents, last = flat.split("/")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    return out


__all__ = ["flat_point", "nested_point"]
