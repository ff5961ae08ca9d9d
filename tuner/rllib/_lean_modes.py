"""An RLModule's train/eval switch without walking its tree when nothing changes.

RLlib's torch RLModule calls `self.train()` before every training forward pass and
`self.eval()` before every exploration or inference pass (and `train()` again after it
when it was training). torch's `Module.train` walks every submodule and sets its flag
through `Module.__setattr__`, also when each flag already has that value: in a profile
of a DQN trial (docs/benchmarks.md) 36,598 such calls for 2,124 passes, 9 % of the
trial. Here a module whose submodules all already have the asked mode returns at once;
otherwise torch's own walk runs. The flags end as torch's would leave them, so every
forward pass, and so every update, is the same.
"""

from __future__ import annotations

import types
import weakref
from typing import Any

# each module's submodules (itself included), listed at its first switch
_SUBMODULES: weakref.WeakKeyDictionary[Any, list[Any]] = weakref.WeakKeyDictionary()


def _lean_train(self: Any, mode: bool = True) -> Any:
    """torch's `Module.train`, skipped where every submodule already has `mode`."""
    if not isinstance(mode, bool):  # torch's own error
        return type(self).train(self, mode)
    submodules = _SUBMODULES.get(self)
    if submodules is None:  # a copy (deepcopy rebinds this method) lists its own
        submodules = _SUBMODULES[self] = list(self.modules())
    if all(m.training == mode for m in submodules):
        return self
    return type(self).train(self, mode)


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
    module.train = types.MethodType(_lean_train, module)
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
