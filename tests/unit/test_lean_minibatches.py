"""The lean minibatch iterator (tuner/rllib/_lean_minibatches.py) yields RLlib's
MiniBatchCyclicIterator's minibatches: the same rows, in the same order, the same
shuffles from numpy's generator, the same count."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from ray.rllib.policy.sample_batch import MultiAgentBatch, SampleBatch
from ray.rllib.utils.minibatch_utils import MiniBatchCyclicIterator

from tuner.rllib._lean_minibatches import LeanMinibatches


def _batch(rows: dict[str, int]) -> MultiAgentBatch:
    generator = torch.Generator().manual_seed(0)
    modules = {}
    for module_id, n in rows.items():
        modules[module_id] = SampleBatch(
            {
                "obs": torch.randn(n, 4, generator=generator),
                "actions": torch.randint(0, 2, (n,), generator=generator),
                "advantages": torch.randn(n, generator=generator),
                "loss_mask": torch.rand(n, generator=generator) > 0.1,
            }
        )
    return MultiAgentBatch(modules, env_steps=max(rows.values()))


def _stream(iterator) -> list[dict]:
    return [{mid: dict(b) for mid, b in minibatch.policy_batches.items()} for minibatch in iterator]


@pytest.mark.parametrize(
    ("rows", "epochs", "size", "shuffle", "total"),
    [
        ({"p": 2103}, 10, 64, True, 0),  # PPO's: 2,048 steps and bootstrap rows
        ({"p": 256}, 3, 64, True, 0),  # minibatches fit exactly
        ({"p": 100}, 2, 64, False, 0),  # no shuffle
        ({"p": 50}, 1, 64, True, 0),  # a minibatch larger than the batch cycles it
        ({"p": 300, "q": 120}, 2, 32, True, 0),  # two modules, each cycled on its own
        ({"p": 300}, 4, 64, True, 7),  # a fixed number of minibatches
    ],
)
def test_the_same_minibatches_as_rllibs_iterator(rows, epochs, size, shuffle, total):
    streams = []
    for lean in (False, True):
        np.random.seed(3)  # SampleBatch.shuffle draws from numpy's global generator
        batch = _batch(rows)
        kwargs = {"num_epochs": epochs, "minibatch_size": size, "num_total_minibatches": total}
        iterator = (
            LeanMinibatches(batch, shuffle=shuffle, **kwargs)
            if lean
            else MiniBatchCyclicIterator(batch, shuffle_batch_per_epoch=shuffle, **kwargs)
        )
        streams.append(_stream(iterator))
    theirs, ours = streams
    assert len(ours) == len(theirs)
    assert theirs
    for mine, rllibs in zip(ours, theirs, strict=True):
        assert mine.keys() == rllibs.keys()
        for module_id, columns in rllibs.items():
            assert mine[module_id].keys() == columns.keys()
            for key, value in columns.items():
                assert mine[module_id][key].dtype == value.dtype, key
                assert torch.equal(mine[module_id][key], value), (module_id, key)


def test_only_tensor_batches_without_sequences_fit():
    assert LeanMinibatches.fits(_batch({"p": 10}))
    with_lists = MultiAgentBatch({"p": SampleBatch({"obs": np.zeros((4, 2))})}, env_steps=4)
    assert not LeanMinibatches.fits(with_lists)
    with_seqs = _batch({"p": 4})
    with_seqs.policy_batches["p"][SampleBatch.SEQ_LENS] = torch.tensor([2, 2])
    assert not LeanMinibatches.fits(with_seqs)


def test_the_lean_ppo_learner_trains_the_same_weights_with_either_iterator(monkeypatch):
    """A whole update of 300 rows, 3 epochs of minibatches of 64, shuffled: the same
    weights and reported values through the lean iterator as through RLlib's."""
    from ray.rllib.utils.metrics import NUM_ENV_STEPS_SAMPLED_LIFETIME

    from tests.unit.test_lean_ppo import MODULE, batch, configs, learner_of
    from tuner.rllib import _lean_minibatches

    iterated = []
    real_iter = LeanMinibatches.__iter__
    monkeypatch.setattr(
        LeanMinibatches, "__iter__", lambda self: iterated.append(1) or real_iter(self)
    )
    runs = {}
    for lean in (False, True):
        monkeypatch.setattr(_lean_minibatches, "LEAN_MINIBATCHES", lean)
        torch.manual_seed(0)
        learner = learner_of(configs(use_kl_loss=True)[0])
        np.random.seed(5)
        data = MultiAgentBatch({MODULE: SampleBatch(batch(300))}, env_steps=300)
        results = learner.update(
            batch=data,
            timesteps={NUM_ENV_STEPS_SAMPLED_LIFETIME: 300},
            num_epochs=3,
            minibatch_size=64,
            shuffle_batch_per_epoch=True,
        )
        state = {k: v.clone() for k, v in learner.module[MODULE].state_dict().items()}
        reported = {
            key: float(stat.peek())
            for key, stat in results[MODULE].items()
            if "throughput" not in key and "timer" not in key
        }
        runs[lean] = (state, reported)
    assert iterated == [1]  # the lean run only
    (theirs, their_metrics), (ours, our_metrics) = runs[False], runs[True]
    assert ours.keys() == theirs.keys()
    for key in ours:
        assert torch.equal(ours[key], theirs[key]), key
    assert "policy_loss" in our_metrics
    assert our_metrics == their_metrics
