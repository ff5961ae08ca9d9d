"""An RLModule's train/eval switch without walking its tree when nothing changes.

RLlib's torch RLModule calls `self.train()` before every training forward pass and
`self.eval()` before every exploration or inference pass (and `train()` again after it
when it was training). torch's `Module.train` walks every submodule and sets its flag
through `Module.__setattr__`, also when each flag already has that value: in a cProfile
of a DQN trial 36,598 such calls for 2,124 passes, 9 % of the profiled time (measured
without the profiler, the switch makes a trial 1.01x to 1.04x as fast: docs/benchmarks.md).
Here a module whose submodules all already have the asked mode returns at once (its
submodule list kept until torch registers a submodule anywhere, told by torch's global
registration hook); otherwise torch's own walk runs. The flags end as torch's would
leave them, so every forward pass, and so every update, is the same.
"""

from __future__ import annotations

import functools
from typing import Any

_HOOKED: list[bool] = []  # the registration hook installed in this process
# Submodule registrations in this process (torch's global registration hook, installed
# with the first lean switch): a module's submodule list read at one count holds until
# the next registration anywhere (none while a trial trains).
_REGISTRATIONS = [0]


def _count_registration(module: Any, name: str, submodule: Any) -> None:
    _REGISTRATIONS[0] += 1


class _Tree:
    """A module's submodules (`Module.modules()`) as last read, and the registration
    count then."""

    def __init__(self) -> None:
        self.seen = -1
        self.modules: list[Any] = []


def _lean_train(self: Any, tree: _Tree, mode: bool = True) -> Any:
    """torch's `Module.train`, skipped where every submodule already has `mode` (the
    submodules read again after any registration: one added later is switched like the
    rest; one deleted may be read until then, which only sends a mismatch to torch's
    walk, after which the tree is read again)."""
    if isinstance(mode, bool):
        if tree.seen != _REGISTRATIONS[0]:
            tree.modules, tree.seen = list(self.modules()), _REGISTRATIONS[0]
        for submodule in tree.modules:
            if submodule.training != mode:
                break
        else:
            return self
        tree.seen = -1  # read the tree again next time: a deleted submodule drops out
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
    if not _HOOKED:
        from torch.nn.modules.module import register_module_module_registration_hook

        register_module_module_registration_hook(_count_registration)
        _HOOKED.append(True)
    # a partial, not a bound method: the module still pickles (torch.save) and a deepcopy
    # switches the copy (its own copied tree)
    module.train = functools.partial(_lean_train, module, _Tree())
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
