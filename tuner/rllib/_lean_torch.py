"""torch's deterministic mode without its fill of every new tensor.

RLlib seeds torch for every seeded trial (`set_torch_seed`: the algorithm, each Learner,
each env runner) and, on a CPU-only torch, turns on `torch.use_deterministic_algorithms`.
With it torch also fills newly allocated tensor memory with NaN
(`torch.utils.deterministic.fill_uninitialized_memory`, on by default), so that a kernel
that reads memory it never wrote gives the same wrong value each run: a write of every
output before the kernel writes it, 5 to 7 % of a small DQN update on this machine
(docs/benchmarks.md, One trial vs. Stable-Baselines3). torch's documentation allows the
fill off for a program that does not use uninitialized memory: RLlib's new API stack
allocates no uninitialized tensor outside its old stack's exploration classes (which fill
theirs at once) and tuner none. A seeded DQN Learner's weights after its updates are bit
for bit those with the fill (tests/unit/test_lean_torch.py; the lean steps' trials
against RLlib's own in tests/integration/test_lean_steps.py). The deterministic
algorithms stay on. A Learner or env runner that RLlib recreates after a failure keeps
torch's fill (slower, the same values).
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
