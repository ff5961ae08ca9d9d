"""The space a sweep searches: the spec's own, or its algorithm's default less the keys
the spec fixes, narrowed to the trial's budget by the rules kept beside the default
space (tuner/search_spaces/defaults.yaml `budget`)."""

from __future__ import annotations

from typing import Any

from tuner import algorithms as registry
from tuner.search_spaces import Domain, is_fixed
from tuner.spec._models import ExperimentSpec


def resolve_space(spec: ExperimentSpec) -> dict[str, Domain]:
    """The space a spec's sweep searches, resolved once.

    `search.space` as given, or the algorithm's default space without the keys `config`
    or `model` fix (a fixed value always wins), narrowed to the budget of
    `stop.timesteps_total` where it gives one.

    Args:
        spec: The sweep's spec.

    Returns:
        Each key's Domain.
    """
    if spec.search.space is not None:
        return dict(spec.search.space)
    if getattr(spec, "custom_algorithm", False):
        return {}  # a training loop of your own has no default space: one trial per sample
    out = {
        key: dom
        for key, dom in registry.default_space(spec.algorithm).items()
        if not _fixed(spec, key)
    }
    rules = {
        key: rule
        for key, rule in registry.get(spec.algorithm).space_budget.items()
        if not _fixed(spec, key)
    }
    return within_budget(out, rules, spec.stop.timesteps_total, spec.config)


def _fixed(spec: ExperimentSpec, key: str) -> bool:
    fixed_model = set(spec.model) | set(spec.config.get("model_config") or {})
    if key.startswith("model."):
        return key.removeprefix("model.") in fixed_model
    return is_fixed(key, spec.config)


def within_budget(
    space: dict[str, Domain],
    rules: dict[str, dict[str, Any]],
    budget: int | None,
    fixed: dict[str, Any],
) -> dict[str, Domain]:
    """A default space narrowed to a trial's budget of env steps (None: no budget, only
    the rules that need none apply). `fixed`: the spec's own settings (an `at_most` key
    it fixes bounds by its value). Rules apply in order, so an `at_most` follows the
    narrowed choices of the key it names."""
    out = dict(space)
    for key, rule in rules.items():
        if "schedule" in rule:
            if budget:
                out[key] = Domain(choice=_schedules(rule["schedule"], budget))
            continue
        dom = out.get(key)
        if dom is None or dom.kind != "choice":
            continue
        choices = list(dom.args)
        if "min_updates" in rule and budget:
            keep = [c for c in choices if c * int(rule["min_updates"]) <= budget]
            choices = keep or [min(choices)]
        if "at_most_fraction" in rule and budget:
            keep = [c for c in choices if c <= float(rule["at_most_fraction"]) * budget]
            choices = keep or [min(choices)]
        if "at_most" in rule:
            bound = fixed.get(rule["at_most"])
            if bound is None and rule["at_most"] in out and out[rule["at_most"]].kind == "choice":
                bound = min(out[rule["at_most"]].args)
            if isinstance(bound, int | float):
                choices = [c for c in choices if c <= bound] or [min(choices)]
        out[key] = Domain(choice=choices)
    return out


def _schedules(rule: dict[str, list[float]], budget: int) -> list[list[list[float]]]:
    """Schedules [[0, 1.0], [fraction x budget, final]] for every fraction and final."""
    return [
        [[0, 1.0], [max(1, int(fraction * budget)), final]]
        for fraction in rule["fractions"]
        for final in rule["finals"]
    ]
