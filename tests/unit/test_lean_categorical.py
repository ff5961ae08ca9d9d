"""RLlib's Categorical's numbers without its objects (tuner/rllib/_lean_categorical.py):
the same values, gradients and draws as torch's Categorical, bit for bit."""

from __future__ import annotations

import pytest
import torch
from ray.rllib.core.distribution.torch.torch_distribution import TorchCategorical

from tuner.rllib import _lean_categorical as categorical


def _logits(seed: int, rows: int = 64, events: int = 4) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return (3 * torch.randn(rows, events, generator=generator)).requires_grad_(True)


@pytest.mark.parametrize("with_kl", [True, False])
def test_log_probabilities_entropy_and_kl_are_torchs_with_the_same_gradients(with_kl):
    actions = torch.randint(0, 4, (64,), generator=torch.Generator().manual_seed(9))
    runs = []
    for lean in (False, True):
        curr_in, prev_in = _logits(1), _logits(2).detach()
        kl = torch.zeros(())
        if lean:  # in the order PPO's loss asks RLlib's objects
            curr = categorical.normalized(curr_in)
            logp = categorical.logp(curr, actions)
            curr_probs = None
            if with_kl:
                kl, curr_probs = categorical.kl(categorical.normalized(prev_in), curr)
            entropy = categorical.entropy(curr, curr_probs)
        else:
            curr_dist = TorchCategorical.from_logits(curr_in)
            logp = curr_dist.logp(actions)
            if with_kl:
                kl = TorchCategorical.from_logits(prev_in).kl(curr_dist)
            entropy = curr_dist.entropy()
        (logp.sum() + 0.3 * kl.sum() - 0.01 * entropy.sum()).backward()
        runs.append((logp.detach(), kl.detach(), entropy.detach(), curr_in.grad))
    for theirs, ours in zip(*runs, strict=True):
        assert torch.equal(ours, theirs)


def test_a_zero_probability_gives_torchs_infinite_and_zero_terms():
    p_in = torch.tensor([[0.0, -float("inf"), 1.0]])  # one event impossible under p
    q_in = torch.tensor([[0.0, 2.0, -float("inf")]])  # another impossible under q
    theirs = TorchCategorical.from_logits(p_in).kl(TorchCategorical.from_logits(q_in))
    ours, _ = categorical.kl(categorical.normalized(p_in), categorical.normalized(q_in))
    assert torch.equal(ours, theirs)
    assert torch.isinf(ours).all()


@pytest.mark.parametrize("shape", [(8, 2), (3, 5), (6,)])
def test_draws_are_torchs_from_the_same_generator_state(shape):
    logits = torch.randn(*shape, generator=torch.Generator().manual_seed(4))
    torch.manual_seed(11)
    theirs = TorchCategorical.from_logits(logits).sample()
    torch.manual_seed(11)
    ours = categorical.sample(categorical.normalized(logits))
    assert ours.shape == theirs.shape
    assert torch.equal(ours, theirs)


def test_only_rllibs_own_categorical_is_taken():
    class Own(TorchCategorical):
        pass

    assert categorical.is_categorical(TorchCategorical)
    assert not categorical.is_categorical(Own)
