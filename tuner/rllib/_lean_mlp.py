"""RLlib's MLPs run as one flat function: the same torch ops, without a module call per
layer.

Every default RLlib model (PPO's, DQN's and SAC's encoders and heads) is built of
`TorchMLP`s, each an `nn.Sequential` of Linear layers, activations and (optionally)
LayerNorms. Calling one goes through torch's module machinery once for the sequence and
once per layer (hook checks, `forward` dispatch): on the small networks RL tunes, more
time than the matrix products (a DQN update's forward pass of [64, 64] nets: RLlib's
about three times a flat function's, docs/benchmarks.md). Here a `TorchMLP` whose layers
are all covered gets a `forward` of its own (an attribute of the instance: a pickle or
deepcopy keeps it) that applies, in order, exactly what each layer's `forward` applies:
`F.linear(x, weight, bias)`, the activation's function with its own arguments,
`F.layer_norm` with the layer's shape, weight, bias and eps. The same values and the same
autograd graph, so the same gradients (tests/unit/test_lean_mlp.py). A layer of another
kind leaves that MLP to torch. Not covered: forward hooks registered on the layers (none
in RLlib; torch would run them, this path does not).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F  # noqa: N812 - torch's own spelling
from torch import nn


def _linear(layer: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    return F.linear(x, layer.weight, layer.bias)


def _layer_norm(layer: nn.LayerNorm, x: torch.Tensor) -> torch.Tensor:
    return F.layer_norm(x, layer.normalized_shape, layer.weight, layer.bias, layer.eps)


def _step(layer: nn.Module) -> Callable[[torch.Tensor], torch.Tensor] | None:
    """What `layer.forward` applies, as a plain function of the input; None for a kind
    this path does not cover."""
    kind = type(layer)
    if kind is nn.Linear:
        return functools.partial(_linear, layer)
    if kind is nn.LayerNorm:
        return functools.partial(_layer_norm, layer)
    if kind is nn.ReLU:
        return functools.partial(F.relu, inplace=layer.inplace)
    if kind is nn.SiLU:
        return functools.partial(F.silu, inplace=layer.inplace)
    if kind is nn.ELU:
        return functools.partial(F.elu, alpha=layer.alpha, inplace=layer.inplace)
    if kind is nn.Tanh:
        return torch.tanh
    if kind is nn.Sigmoid:
        return torch.sigmoid
    if kind is nn.Identity:
        return _identity
    return None


def _identity(x: torch.Tensor) -> torch.Tensor:
    return x


def _flat_forward(steps: tuple[Callable[[torch.Tensor], torch.Tensor], ...], x: Any) -> Any:
    for step in steps:
        x = step(x)
    return x


def lean_mlp(mlp: nn.Module) -> bool:
    """Gives one RLlib TorchMLP the flat forward, where every layer is covered.

    Args:
        mlp: A TorchMLP (its layers in `mlp.mlp`, an nn.Sequential).

    Returns:
        True if it took it.
    """
    sequence = getattr(mlp, "mlp", None)
    if type(sequence) is not nn.Sequential:
        return False
    steps = [_step(layer) for layer in sequence]
    if any(step is None for step in steps):
        return False
    mlp.forward = functools.partial(_flat_forward, tuple(steps))
    return True


def lean_mlps(module: Any) -> int:
    """The flat forward for every RLlib TorchMLP in a module (an RLModule, a
    MultiRLModule, or any torch module holding them).

    Args:
        module: The module.

    Returns:
        How many MLPs took it.
    """
    from ray.rllib.core.models.torch.primitives import TorchMLP

    if not isinstance(module, nn.Module):
        return 0
    return sum(lean_mlp(m) for m in module.modules() if type(m) is TorchMLP)


def lean_learner_mlps(learner: Any) -> int:
    """The flat forward for the MLPs of every module a Learner trains.

    Args:
        learner: A Learner, built (in its own process: LearnerGroup.foreach_learner).

    Returns:
        How many MLPs took it.
    """
    multi = learner.module
    return sum(lean_mlps(multi[module_id]) for module_id in multi.keys())


def lean_runner_mlps(runner: Any) -> int:
    """The flat forward for the MLPs of an env runner's module.

    Args:
        runner: An EnvRunner (in its own process: EnvRunnerGroup.foreach_env_runner).

    Returns:
        How many MLPs took it (0 for a runner without a torch module).
    """
    return lean_mlps(getattr(runner, "module", None))
