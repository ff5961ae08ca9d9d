"""Search-space domains, and the space a sweep searches (the spec's, or the default of
its algorithm from the registry, less the keys the spec fixes)."""

from typing import Any

from tuner.search_spaces._domains import DOMAIN_KINDS, Domain


def default_space(algorithm: str) -> dict[str, Domain]:
    """The default search space of an algorithm or preset (see tuner.algorithms)."""
    from tuner.algorithms import default_space as _default

    return _default(algorithm)


def resolve_space(spec: Any) -> dict[str, Domain]:
    """The space a spec's sweep searches, resolved once: `search.space` as given, or the
    algorithm's default space without the keys `config` or `model` fix (a fixed value
    always wins)."""
    if spec.search.space is not None:
        return dict(spec.search.space)
    if getattr(spec, "custom_algorithm", False):
        return {}  # a training loop of your own has no default space: one trial per sample
    fixed_model = set(spec.model) | set(spec.config.get("model_config") or {})
    out = {}
    for key, dom in default_space(spec.algorithm).items():
        if key in spec.config:
            continue
        if key.startswith("model.") and key.removeprefix("model.") in fixed_model:
            continue
        out[key] = dom
    return out


__all__ = ["DOMAIN_KINDS", "Domain", "default_space", "resolve_space"]
