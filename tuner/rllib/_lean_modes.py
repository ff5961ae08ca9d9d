"""An RLModule's train/eval switch without walking its tree when nothing changes.

RLlib's torch RLModule calls `self.train()` before every training forward pass and
`self.eval()` before every exploration or inference pass (and `train()` again after it
when it was training). torch's `Module.train` walks every submodule and sets its flag
through `Module.__setattr__`, also when each flag already has that value: in a cProfile
of a DQN trial 36,598 such calls for 2,124 passes, 9 % of the profiled time (measured
without the profiler, the switch makes a trial 1.01x to 1.04x as fast: docs/benchmarks.md).
Here a module whose submodules all already have the asked mode returns at once;
otherwise torch's own walk runs. The flags end as torch's would leave them, so every
forward pass, and so every update, is the same.
"""

from __future__ import annotations

import functools
from typing import Any


def _all_in_mode(module: Any, mode: bool) -> bool:
    """Whether the module and every submodule (read from the tree now) have `mode`:
    `Module.modules()`'s tree, walked without its generator's memo set and name strings
    (a quarter of its time on an RLlib DQN module; a shared submodule is read twice)."""
    stack = [module]
    while stack:
        current = stack.pop()
        if current.training != mode:
            return False
        for child in current._modules.values():
            if child is not None:  # torch allows an empty slot
                stack.append(child)
    return True


def _lean_train(self: Any, mode: bool = True) -> Any:
    """torch's `Module.train`, skipped where every submodule already has `mode` (the
    submodules read each time: one added later is switched like the rest)."""
    if isinstance(mode, bool) and _all_in_mode(self, mode):
        return self
    return type(self).train(self, mode)  # torch's own walk (and its error for a non-bool)


def lean_mode_switches(module: Any) -> bool:
    """Gives a torch module the lean train/eval switch (an attribute of this instance;
    `eval()` goes through it too).

    Args:
        module: A torch RLModule, built (its target networks, if any, made).

    Returns:
        True if it took it (a torch.nn.Module), else False.
    """
    import torch

    if not isinstance(module, torch.nn.Module):
        return False
    # a partial, not a bound method: the module still pickles (torch.save) and a deepcopy
    # switches the copy
    module.train = functools.partial(_lean_train, module)
    return True


def lean_learner_modes(learner: Any) -> int:
    """The lean switch for each torch module a Learner trains.

    Args:
        learner: A Learner, built (in its own process: LearnerGroup.foreach_learner).

    Returns:
        How many of its modules took it.
    """
    multi = learner.module
    return sum(lean_mode_switches(multi[module_id]) for module_id in multi.keys())
