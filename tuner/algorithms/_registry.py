"""The algorithm registry: every algorithm and preset a spec can name, read from the
data files once (algorithms.yaml, presets.yaml, tuner/search_spaces/defaults.yaml)."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import yaml

from tuner.algorithms._info import AlgorithmInfo
from tuner.search_spaces import Domain

_HERE = Path(__file__).parent
_ALGORITHMS = _HERE / "algorithms.yaml"
_PRESETS = _HERE / "presets.yaml"
_SPACES = _HERE.parent / "search_spaces" / "defaults.yaml"


def _read(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text()) or {}


def _unfixed(space: dict[str, Any], fixed: dict[str, Any]) -> dict[str, Any]:
    """A default space without the keys a preset fixes: a preset's value always wins
    (Rainbow_DQN's `n_step: 3` is not searched over DQN's {1, 3})."""
    return {key: dom for key, dom in space.items() if key not in fixed}


@cache
def _entries() -> dict[str, AlgorithmInfo]:
    algorithms, presets, spaces = _read(_ALGORITHMS), _read(_PRESETS), _read(_SPACES)
    out: dict[str, AlgorithmInfo] = {}
    for name, entry in algorithms.items():
        own = presets.get(name, {})  # an algorithm's own fixed settings (APPO)
        out[name] = AlgorithmInfo(
            name=name,
            base_algorithm=name,
            doc=own.get("doc") or entry.get("doc"),
            actions=entry.get("actions", []),
            gpu_learner=bool(entry.get("gpu_learner")),
            lstm=bool(entry.get("lstm")),
            preset_config=own.get("config", {}),
            performance_defaults=entry.get("performance_defaults") or {},
            flat_replay_defaults=entry.get("flat_replay_defaults") or {},
            default_space=_unfixed(spaces.get(name, {}).get("space", {}), own.get("config", {})),
            space_source=spaces.get(name, {}).get("source"),
            space_reasons=spaces.get(name, {}).get("why", {}),
            space_budget=_unfixed(spaces.get(name, {}).get("budget", {}), own.get("config", {})),
            warnings=own.get("warnings", []),
        )
    for name, preset in presets.items():
        if name in algorithms:
            continue
        base = out[preset["algorithm"]]  # a preset of an unknown algorithm is a data bug
        out[name] = base.model_copy(
            update={
                "name": name,
                "doc": preset.get("doc"),
                "preset_config": preset.get("config", {}),
                "default_space": _unfixed(
                    spaces.get(base.name, {}).get("space", {}), preset.get("config", {})
                ),
                "space_budget": _unfixed(
                    spaces.get(base.name, {}).get("budget", {}), preset.get("config", {})
                ),
                "warnings": preset.get("warnings", []),
            },
            deep=True,
        )
    return out


def algorithms() -> list[AlgorithmInfo]:
    """Every algorithm, then every preset, as `GET /api/v1/algorithms` lists them."""
    return [e.model_copy(deep=True) for e in _entries().values()]


def names() -> tuple[str, ...]:
    """Every name a spec's `algorithm` accepts."""
    return tuple(_entries())


def base_algorithms() -> tuple[str, ...]:
    """The RLlib algorithms themselves (PPO APPO IMPALA DQN SAC)."""
    return tuple(n for n, e in _entries().items() if e.base_algorithm == n)


def presets() -> tuple[str, ...]:
    """The named presets (Double_DQN, Rainbow_DQN, ...)."""
    return tuple(n for n, e in _entries().items() if e.base_algorithm != n)


def get(name: str) -> AlgorithmInfo:
    """One algorithm or preset; KeyError naming the known ones."""
    entries = _entries()
    if name not in entries:
        raise KeyError(f"unknown algorithm {name!r}; known: {', '.join(entries)}")
    return entries[name]


def base_algorithm(name: str) -> str:
    """The RLlib algorithm behind a name (Rainbow_DQN -> DQN)."""
    return get(name).base_algorithm


def default_space(name: str) -> dict[str, Domain]:
    """The default search space of an algorithm or preset: its base algorithm's, less
    the keys the preset fixes."""
    entry = get(name)
    if not entry.default_space:
        raise KeyError(f"no default search space for {name!r}")
    return {key: Domain.model_validate(dom) for key, dom in entry.default_space.items()}
