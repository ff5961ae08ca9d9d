"""The algorithm registry: every algorithm and preset a spec can name, read from the
data files once (algorithms.yaml, presets.yaml, tuner/search_spaces/defaults.yaml), each
as its schema (_schema.py), and the names they share checked against algorithms.yaml."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

from tuner.algorithms._info import AlgorithmInfo
from tuner.algorithms._schema import AlgorithmsFile, PresetsFile, SpaceEntry, SpacesFile
from tuner.data_files import DataFileError, load_data_file
from tuner.search_spaces import Domain, is_fixed

_HERE = Path(__file__).parent
_ALGORITHMS = _HERE / "algorithms.yaml"
_PRESETS = _HERE / "presets.yaml"
_SPACES = _HERE.parent / "search_spaces" / "defaults.yaml"


def _unfixed(space: dict[str, Any], fixed: dict[str, Any]) -> dict[str, Any]:
    """A default space without the keys a preset fixes: a preset's value always wins
    (Rainbow_DQN's `n_step: 3` is not searched over DQN's {1, 3})."""
    return {key: dom for key, dom in space.items() if not is_fixed(key, fixed)}


def _narrowed(space: SpaceEntry | None, fixed: dict[str, Any]) -> dict[str, Any]:
    """An entry's default space and budget rules: its base algorithm's, less the keys
    `fixed` fixes; none where the algorithm has no default space."""
    if space is None:
        return {"default_space": {}, "space_budget": {}}
    return {
        "default_space": _unfixed(space.space_data(), fixed),
        "space_budget": _unfixed(space.budget_rules(), fixed),
    }


def _check_names(
    algorithms: AlgorithmsFile, presets: PresetsFile, spaces: SpacesFile, files: tuple[Path, ...]
) -> None:
    """The names the three files share (`files`: their paths, in that order): a preset
    runs on an algorithm of algorithms.yaml (an entry named like one, on that one), and a
    default space is an algorithm's."""
    algorithms_file, presets_file, spaces_file = files
    known = f"an algorithm of {algorithms_file.name} ({', '.join(algorithms.root)})"
    wrong = []
    for name, preset in presets.root.items():
        loc = f"{name}.algorithm"
        if preset.algorithm not in algorithms.root:
            wrong.append((loc, f"{preset.algorithm!r} is not {known}"))
        elif name in algorithms.root and preset.algorithm != name:
            wrong.append(
                (loc, f"an entry named like an algorithm runs on it, not on {preset.algorithm!r}")
            )
    if wrong:
        raise DataFileError(presets_file, wrong)
    unknown = [(name, f"not {known}") for name in spaces.root if name not in algorithms.root]
    if unknown:
        raise DataFileError(spaces_file, unknown)


@cache
def _entries(
    algorithms_file: Path = _ALGORITHMS, presets_file: Path = _PRESETS, spaces_file: Path = _SPACES
) -> dict[str, AlgorithmInfo]:
    algorithms = load_data_file(algorithms_file, AlgorithmsFile)
    presets = load_data_file(presets_file, PresetsFile)
    spaces = load_data_file(spaces_file, SpacesFile)
    _check_names(algorithms, presets, spaces, (algorithms_file, presets_file, spaces_file))
    out: dict[str, AlgorithmInfo] = {}
    for name, entry in algorithms.root.items():
        own = presets.root.get(name)  # an algorithm's own fixed settings (APPO)
        fixed = own.config if own else {}
        space = spaces.root.get(name)
        out[name] = AlgorithmInfo(
            name=name,
            base_algorithm=name,
            doc=(own and own.doc) or entry.doc,
            actions=entry.actions,
            gpu_learner=entry.gpu_learner,
            lstm=entry.lstm,
            preset_config=fixed,
            performance_defaults=entry.performance_defaults,
            flat_replay_defaults=entry.flat_replay_defaults,
            space_source=space.source if space else None,
            space_reasons=space.why if space else {},
            warnings=own.warnings if own else [],
            **_narrowed(space, fixed),
        )
    for name, preset in presets.root.items():
        if name in algorithms.root:
            continue
        base = out[preset.algorithm]
        out[name] = base.model_copy(
            update={
                "name": name,
                "doc": preset.doc,
                "preset_config": preset.config,
                "warnings": preset.warnings,
                **_narrowed(spaces.root.get(base.name), preset.config),
            },
            deep=True,
        )
    return out


def algorithms() -> list[AlgorithmInfo]:
    """Every algorithm, then every preset, as `GET /api/v1/algorithms` lists them.

    Returns:
        The AlgorithmInfo of each algorithm, then of each preset.
    """
    return [e.model_copy(deep=True) for e in _entries().values()]


def names() -> tuple[str, ...]:
    """Every name a spec's `algorithm` accepts.

    Returns:
        The algorithms' and the presets' names.
    """
    return tuple(_entries())


def base_algorithms() -> tuple[str, ...]:
    """The RLlib algorithms themselves (PPO APPO IMPALA DQN SAC).

    Returns:
        Their names.
    """
    return tuple(n for n, e in _entries().items() if e.base_algorithm == n)


def presets() -> tuple[str, ...]:
    """The named presets (Double_DQN, Rainbow_DQN, ...).

    Returns:
        Their names.
    """
    return tuple(n for n, e in _entries().items() if e.base_algorithm != n)


def get(name: str) -> AlgorithmInfo:
    """One algorithm or preset.

    Args:
        name: An algorithm's or a preset's name.

    Returns:
        Its AlgorithmInfo.

    Raises:
        KeyError: `name` is neither; the message names the known ones.
    """
    entries = _entries()
    if name not in entries:
        raise KeyError(f"unknown algorithm {name!r}; known: {', '.join(entries)}")
    return entries[name]


def base_algorithm(name: str) -> str:
    """The RLlib algorithm behind a name (Rainbow_DQN -> DQN).

    Args:
        name: An algorithm's or a preset's name.

    Returns:
        The base algorithm's name.
    """
    return get(name).base_algorithm


def default_space(name: str) -> dict[str, Domain]:
    """The default search space of an algorithm or preset.

    Its base algorithm's, less the keys the preset fixes.

    Args:
        name: An algorithm's or a preset's name.

    Returns:
        The space: each key's Domain.
    """
    entry = get(name)
    if not entry.default_space:
        raise KeyError(f"no default search space for {name!r}")
    return {key: Domain.model_validate(dom) for key, dom in entry.default_space.items()}
