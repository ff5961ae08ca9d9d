"""torch's deterministic mode without its fill of every new tensor.

RLlib seeds torch for every seeded trial (`set_torch_seed`: the algorithm, each Learner,
each env runner) and, on a CPU-only torch, turns on `torch.use_deterministic_algorithms`.
With it torch also fills the memory of every tensor it allocates with NaN
(`torch.utils.deterministic.fill_uninitialized_memory`, on by default), so that a kernel
that reads memory it never wrote gives the same wrong value each run: the fill is a write
of every output before the kernel writes it again, about 5 % of a small DQN update on
this machine (docs/benchmarks.md). No kernel torch ships reads its output before writing
it, so every update and every action is the same without the fill (tests/unit/
test_lean_torch.py checks the weights bit for bit); the deterministic algorithms stay on.
"""

from __future__ import annotations

from typing import Any


def skip_uninitialized_fill(_: Any = None) -> bool:
    """Turns torch's fill of new tensors off in this process (deterministic algorithms
    stay as they are).

    Args:
        _: Ignored (a Learner or an env runner, as `foreach_learner` and
            `foreach_env_runner` call it).

    Returns:
        True if the fill was on.
    """
    import torch.utils.deterministic as deterministic

    was = bool(deterministic.fill_uninitialized_memory)
    deterministic.fill_uninitialized_memory = False
    return was
