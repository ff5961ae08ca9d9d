"""RLlib's MLPs as flat functions (tuner/rllib/_lean_mlp.py): each covered layer kind
gives torch's own values; PPO's, DQN's and SAC's default modules give the same outputs
and gradients; an uncovered layer leaves its MLP to torch; a copy and a pickle keep it."""

from __future__ import annotations

import copy
import io

import pytest
import torch
from ray.rllib.core.columns import Columns
from ray.rllib.core.models.torch.primitives import TorchMLP
from torch import nn

from tests.unit.test_lean_metrics import _config
from tuner.rllib._lean_mlp import lean_mlp, lean_mlps


def _mlp(*layers: nn.Module) -> TorchMLP:
    mlp = TorchMLP(input_dim=4, hidden_layer_dims=[8], output_dim=3)
    mlp.mlp = nn.Sequential(*layers)
    return mlp


def _leaned(module):
    lean = copy.deepcopy(module)
    assert lean_mlps(lean) > 0
    return lean


def test_each_covered_layer_kind_gives_torchs_values_and_gradients():
    torch.manual_seed(0)
    own = _mlp(
        nn.Linear(4, 8),
        nn.LayerNorm(8, eps=0.001),
        nn.ReLU(),
        nn.Linear(8, 8),
        nn.SiLU(),
        nn.ELU(alpha=0.5),
        nn.Tanh(),
        nn.Identity(),
        nn.Linear(8, 3),
        nn.Sigmoid(),
    )
    lean = copy.deepcopy(own)
    assert lean_mlp(lean)
    assert "forward" in vars(lean)
    x = torch.randn(16, 4)
    theirs, ours = own(x), lean(x)
    assert torch.equal(ours, theirs)
    theirs.sum().backward()
    ours.sum().backward()
    for (name, a), b in zip(own.named_parameters(), lean.parameters(), strict=True):
        assert torch.equal(a.grad, b.grad), name


def test_an_uncovered_layer_leaves_the_mlp_to_torch():
    mlp = _mlp(nn.Linear(4, 8), nn.Dropout(0.5), nn.Linear(8, 3))
    assert not lean_mlp(mlp)
    assert "forward" not in vars(mlp)
    assert lean_mlps(nn.Linear(2, 2)) == 0  # no TorchMLP in it
    assert lean_mlps(None) == 0


def test_a_copy_runs_its_own_layers_and_a_pickle_keeps_the_flat_forward():
    torch.manual_seed(1)
    lean = _mlp(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    assert lean_mlp(lean)
    x = torch.randn(2, 4)
    before = lean(x).detach().clone()
    copied = copy.deepcopy(lean)
    with torch.no_grad():
        copied.mlp[0].weight.add_(1.0)
    assert torch.equal(lean(x), before)  # the original's layers, not the copy's
    assert not torch.equal(copied(x), before)
    buffer = io.BytesIO()
    torch.save(lean, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=False)
    assert "forward" in vars(loaded)
    assert torch.equal(loaded(x), before)


def _module(algorithm: str):
    import gymnasium as gym

    env = gym.make("Pendulum-v1" if algorithm == "SAC" else "CartPole-v1")
    config = _config(algorithm).learners(num_learners=0)
    torch.manual_seed(0)
    return config.build_learner(env=env).module["default_policy"]


def _train_batch(algorithm: str) -> dict:
    n, dims = 16, 3 if algorithm == "SAC" else 4
    g = torch.Generator().manual_seed(2)
    actions = (
        torch.rand(n, 1, generator=g) * 4 - 2
        if algorithm == "SAC"
        else torch.randint(0, 2, (n,), generator=g)
    )
    return {
        Columns.OBS: torch.randn(n, dims, generator=g),
        Columns.NEXT_OBS: torch.randn(n, dims, generator=g),
        Columns.ACTIONS: actions,
    }


def _tensors(out) -> list[torch.Tensor]:
    if isinstance(out, dict):
        return [t for k in sorted(out, key=str) for t in _tensors(out[k])]
    return [out] if isinstance(out, torch.Tensor) else []


@pytest.mark.parametrize("algorithm", ["PPO", "DQN", "SAC"])
def test_rllibs_default_modules_give_the_same_outputs_and_gradients(algorithm):
    own = _module(algorithm)
    lean = _leaned(own)
    batch = _train_batch(algorithm)
    outs = []
    for module in (own, lean):
        torch.manual_seed(3)  # SAC samples its actions in the forward pass
        outs.append(_tensors(module.forward_train(batch)))
    assert len(outs[0]) == len(outs[1]) > 0
    for theirs, ours in zip(*outs, strict=True):
        assert torch.equal(ours, theirs)
    for out in outs:
        sum(t.float().sum() for t in out if t.requires_grad).backward()
    grads = [[p.grad for p in m.parameters()] for m in (own, lean)]
    assert any(g is not None for g in grads[0])
    for theirs, ours in zip(*grads, strict=True):
        assert (theirs is None) == (ours is None)
        if theirs is not None:
            assert torch.equal(ours, theirs)
