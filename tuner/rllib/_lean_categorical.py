"""RLlib's Categorical action distribution's numbers, without its objects.

RLlib wraps torch's Categorical (`TorchCategorical`); PPO builds one per minibatch in its
loss (two with the KL term) and the env runner one per env step (RLlib's GetActions
piece), each normalizing its logits, computing its probabilities and checking its
arguments through torch.distributions' machinery: a twentieth of a small PPO trial.
Here the same torch operations on the same tensors, in the same order, with the
probabilities shared where torch's object caches them: the same values and gradients,
and the same draws from torch's generator (tests/unit/test_lean_categorical.py compares
each with torch's; the lean PPO loss and sampling tests compare whole updates and
episodes with RLlib's).
"""

from __future__ import annotations

import math
from typing import Any

import torch
from ray.rllib.core.distribution.torch.torch_distribution import TorchCategorical


def is_categorical(dist_class: Any) -> bool:
    """Whether an RLModule's action distribution class is RLlib's TorchCategorical itself.

    Args:
        dist_class: The class the module names.

    Returns:
        True for TorchCategorical (not a subclass, which may compute otherwise).
    """
    return dist_class is TorchCategorical


def normalized(logits: torch.Tensor) -> torch.Tensor:
    """The log-probabilities torch's Categorical keeps: logits minus their logsumexp.

    Args:
        logits: The distribution's inputs, the events on the last axis.

    Returns:
        The normalized logits.
    """
    return logits - logits.logsumexp(dim=-1, keepdim=True)


def probs(norm: torch.Tensor) -> torch.Tensor:
    """The probabilities (torch's `logits_to_probs`: a softmax over the last axis).

    Args:
        norm: Normalized logits.

    Returns:
        The probabilities.
    """
    return torch.softmax(norm, dim=-1)


def logp(norm: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
    """The log-probability of each action (torch's `Categorical.log_prob`).

    Args:
        norm: Normalized logits.
        actions: One action per row.

    Returns:
        The log-probabilities.
    """
    value = actions.long().unsqueeze(-1)
    value, log_pmf = torch.broadcast_tensors(value, norm)
    return log_pmf.gather(-1, value[..., :1]).squeeze(-1)


def entropy(norm: torch.Tensor, p: torch.Tensor | None = None) -> torch.Tensor:
    """The entropy per row (torch's `Categorical.entropy`).

    Args:
        norm: Normalized logits.
        p: Their probabilities where already computed (torch's cached `probs`), else
            computed here, after the clamp, as torch computes them on first use.

    Returns:
        The entropies.
    """
    clamped = torch.clamp(norm, min=torch.finfo(norm.dtype).min)
    return -(clamped * (probs(norm) if p is None else p)).sum(-1)


def kl(p_norm: torch.Tensor, q_norm: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """KL(p || q) per row (torch's registered Categorical-Categorical divergence), and
    q's probabilities as it computes them on the way (for q's entropy to share).

    Args:
        p_norm: p's normalized logits.
        q_norm: q's normalized logits.

    Returns:
        The divergences, and q's probabilities.
    """
    p = probs(p_norm)
    t = p * (p_norm - q_norm)
    q = probs(q_norm)
    t[(q == 0).expand_as(t)] = math.inf
    t[(p == 0).expand_as(t)] = 0
    return t.sum(-1), q


def sample(norm: torch.Tensor) -> torch.Tensor:
    """One action per row, drawn as torch's `Categorical.sample()` draws it.

    Args:
        norm: Normalized logits.

    Returns:
        The actions.
    """
    p = probs(norm)
    draws = torch.multinomial(p.reshape(-1, p.size(-1)), 1, True).T
    return draws.reshape(norm.shape[:-1])
