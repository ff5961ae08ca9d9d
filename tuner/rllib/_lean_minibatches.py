"""PPO's minibatches as RLlib cuts them, without SampleBatch slicing per minibatch.

The lean PPO Learner (`_lean_ppo.py`, through ray_internals.LeanMinibatchHook) iterates
its train batch with `LeanMinibatches` where the batch holds torch tensors and no
sequences; anything else keeps RLlib's MiniBatchCyclicIterator.
tests/unit/test_lean_minibatches.py compares the two minibatch by minibatch.
"""

from __future__ import annotations

from typing import Any

import torch
from ray.rllib.policy.sample_batch import MultiAgentBatch, SampleBatch

# False: the lean PPO Learner iterates with RLlib's own iterator (for A/Bs)
LEAN_MINIBATCHES = True


class LeanMinibatches:
    """RLlib 2.60's MiniBatchCyclicIterator over a batch of torch tensors without
    sequences: the same cycling over each module's rows (a minibatch that runs past the
    end takes the rest, the module batch is shuffled by its own `shuffle()`, the same
    numpy draw, and it goes on from the start), the same stop (every row seen
    `num_epochs` times, or `num_total_minibatches`), built from tensor slices (views) and
    one torch.cat where a minibatch spans the end, instead of SampleBatch slicing and
    concat_samples per minibatch (130 us a minibatch of 64 on this machine)."""

    def __init__(
        self,
        batch: Any,
        *,
        num_epochs: int,
        minibatch_size: int,
        shuffle: bool,
        num_total_minibatches: int = 0,
    ) -> None:
        self.batch = batch
        self.num_epochs = num_epochs
        self.minibatch_size = minibatch_size
        self.shuffle = shuffle
        self.num_total_minibatches = num_total_minibatches

    @staticmethod
    def fits(batch: Any) -> bool:
        """Whether every module batch holds torch tensors only, and no sequences.

        Args:
            batch: A MultiAgentBatch.

        Returns:
            True where the lean iterator yields what RLlib's would.
        """
        for module_batch in batch.policy_batches.values():
            if SampleBatch.SEQ_LENS in module_batch:
                return False
            if not all(isinstance(v, torch.Tensor) for v in module_batch.values()):
                return False
        return True

    def __iter__(self) -> Any:
        modules = self.batch.policy_batches
        start = dict.fromkeys(modules, 0)
        covered = dict.fromkeys(modules, 0)
        count = 0
        total = self.num_total_minibatches
        while (total == 0 and min(covered.values()) < self.num_epochs) or (
            total > 0 and count < total
        ):
            minibatch = {}
            for module_id, module_batch in modules.items():
                rows = len(module_batch)
                if rows == 0:
                    raise ValueError(f"The batch for module_id {module_id} is empty!")
                s, need, pieces = start[module_id], self.minibatch_size, []
                while s + need >= rows:
                    pieces.append({k: v[s:] for k, v in module_batch.items()})
                    need -= rows - s
                    s = 0
                    covered[module_id] += 1
                    if self.shuffle:
                        module_batch.shuffle()
                if s + need > s:
                    pieces.append({k: v[s : s + need] for k, v in module_batch.items()})
                columns = (
                    pieces[0]
                    if len(pieces) == 1
                    else {k: torch.cat([p[k] for p in pieces]) for k in pieces[0]}
                )
                minibatch[module_id] = SampleBatch(columns)
                start[module_id] = s + need
            yield MultiAgentBatch(minibatch, len(self.batch))
            count += 1


def lean_minibatches(batch: Any, **settings: Any) -> LeanMinibatches | None:
    """The lean iterator over `batch`, or None where RLlib's must run (the switch is off,
    or a column is not a tensor or holds sequences).

    Args:
        batch: The train batch (a MultiAgentBatch).
        **settings: LeanMinibatches' settings (num_epochs, minibatch_size, shuffle,
            num_total_minibatches).

    Returns:
        The iterator, or None.
    """
    if not LEAN_MINIBATCHES or not LeanMinibatches.fits(batch):
        return None
    return LeanMinibatches(batch, **settings)
