"""Default search space per algorithm, kept as data in defaults.yaml."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import yaml

from tuner.search_spaces._domains import Domain

_DEFAULTS = Path(__file__).with_name("defaults.yaml")


@cache
def _load() -> dict[str, dict[str, dict]]:
    data = yaml.safe_load(_DEFAULTS.read_text())
    return {algo: entry["space"] for algo, entry in data.items()}


def default_space(algorithm: str) -> dict[str, Domain]:
    """The default search space of an RLlib algorithm (PPO, APPO, IMPALA, DQN, SAC)."""
    spaces = _load()
    if algorithm not in spaces:
        raise KeyError(f"no default search space for {algorithm!r}")
    return {key: Domain.model_validate(dom) for key, dom in spaces[algorithm].items()}
