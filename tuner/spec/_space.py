"""The space a sweep searches: the spec's own, or its algorithm's default less the keys
the spec fixes."""

from __future__ import annotations

from tuner import algorithms as registry
from tuner.search_spaces import Domain
from tuner.spec._models import ExperimentSpec


def resolve_space(spec: ExperimentSpec) -> dict[str, Domain]:
    """The space a spec's sweep searches, resolved once: `search.space` as given, or the
    algorithm's default space without the keys `config` or `model` fix (a fixed value
    always wins)."""
    if spec.search.space is not None:
        return dict(spec.search.space)
    if getattr(spec, "custom_algorithm", False):
        return {}  # a training loop of your own has no default space: one trial per sample
    fixed_model = set(spec.model) | set(spec.config.get("model_config") or {})
    out = {}
    for key, dom in registry.default_space(spec.algorithm).items():
        if key in spec.config:
            continue
        if key.startswith("model.") and key.removeprefix("model.") in fixed_model:
            continue
        out[key] = dom
    return out
