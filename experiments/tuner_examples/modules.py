"""A custom RLModule for PPO (experiments/custom-module-cartpole.yaml)."""

from __future__ import annotations

from typing import Any

import torch
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.apis.value_function_api import ValueFunctionAPI
from ray.rllib.core.rl_module.torch import TorchRLModule


class TwoHeadMLP(TorchRLModule, ValueFunctionAPI):
    """A shared MLP trunk with a policy head and a value head. model_config keys:
    `hidden` (width, default 32) and `layers` (depth, default 1)."""

    def setup(self) -> None:
        width = int(self.model_config.get("hidden", 32))
        layers: list[torch.nn.Module] = []
        size = self.observation_space.shape[0]
        for _ in range(int(self.model_config.get("layers", 1))):
            layers += [torch.nn.Linear(size, width), torch.nn.Tanh()]
            size = width
        self.trunk = torch.nn.Sequential(*layers)
        self.pi = torch.nn.Linear(size, self.action_space.n)
        self.vf = torch.nn.Linear(size, 1)

    def _forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return {Columns.ACTION_DIST_INPUTS: self.pi(self.trunk(batch[Columns.OBS]))}

    def compute_values(self, batch: dict[str, Any], embeddings: Any = None) -> torch.Tensor:
        return self.vf(self.trunk(batch[Columns.OBS])).squeeze(-1)
