"""Which algorithms a spec can name.

Each RLlib algorithm and preset with its base algorithm, default search space, what it
supports and its performance defaults, kept as data (algorithms.yaml, presets.yaml,
tuner/search_spaces/defaults.yaml).
"""

from tuner.algorithms._info import AlgorithmInfo
from tuner.algorithms._registry import (
    algorithms,
    base_algorithm,
    base_algorithms,
    default_space,
    get,
    names,
    presets,
)

__all__ = [
    "AlgorithmInfo",
    "algorithms",
    "base_algorithm",
    "base_algorithms",
    "default_space",
    "get",
    "names",
    "presets",
]
