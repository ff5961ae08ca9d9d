"""SAC's Q-network with the observation and action concatenated into one MLP: the shape
of stable-baselines3's (and of the SAC paper's) critic, chosen with `model: {q_encoder:
concat}`.

RLlib 2.60's SAC encodes the observation and the action in separate streams, then fuses
them (a `MultiStreamEncoder`): with SB3's [256, 256] that is 2.3x SB3's parameters, and
on small envs the learner update, which dominates a SAC trial, costs as much more. With
`q_encoder: concat`, each Q-network is one MLP over [obs, action] with `fcnet_hiddens`
(as RLlib builds the policy's encoder), then the Q head (`head_fcnet_hiddens`): with
`fcnet_hiddens: [256, 256]` and `head_fcnet_hiddens: []`, exactly SB3's default SAC
networks. `multi_stream` is RLlib's own. `auto`, the default of a sweep's SAC
(tuner/algorithms/presets.yaml), is concat on flat (1-D Box) observations and RLlib's own
on any other. The trainable always uses this catalog (TunerSAC in
tuner/rllib/_trainables.py); without the key it builds RLlib's own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from gymnasium.spaces import Box
from ray.rllib.algorithms.sac.sac import SACConfig
from ray.rllib.algorithms.sac.sac_catalog import SACCatalog
from ray.rllib.core.columns import Columns
from ray.rllib.core.models.configs import MLPEncoderConfig

from tuner.ray_internals import QEncoderHook, catalog_model_config

Q_ENCODER = "q_encoder"  # the model_config key
# RLlib's own, one MLP over [obs, action], and concat where the observations are flat
Q_ENCODERS = ("multi_stream", "concat", "auto")


class ConcatQEncoder(torch.nn.Module):
    """Runs the MLP encoder on [obs, action] concatenated on the last axis."""

    def __init__(self, mlp: torch.nn.Module) -> None:
        super().__init__()
        self.mlp = mlp

    def forward(self, batch: dict[str, Any]) -> dict[str, Any]:
        joint = torch.cat([batch[Columns.OBS], batch[Columns.ACTIONS]], dim=-1)
        return self.mlp({Columns.OBS: joint})


class TunerSACCatalog(QEncoderHook, SACCatalog):
    """SACCatalog, with `model_config["q_encoder"] == "concat"` building each Q-network's
    encoder as one MLP over the concatenated flat observation and action."""

    def tuner_q_encoder(self, framework: str, rllib_default: Callable[[str], Any]) -> Any:
        """The Q-networks' encoder: RLlib's (multi_stream) or one MLP (concat)."""
        model_config = catalog_model_config(self)
        kind = model_config.get(Q_ENCODER) or "multi_stream"
        if kind not in Q_ENCODERS:
            raise ValueError(f"model.q_encoder must be one of {Q_ENCODERS}, got {kind!r}")
        obs_shape = tuple(getattr(self.observation_space, "shape", None) or ())
        if kind == "auto":
            flat = len(obs_shape) == 1 and framework == "torch"
            kind = "concat" if flat and isinstance(self.observation_space, Box) else "multi_stream"
        if kind == "multi_stream":
            return rllib_default(framework)
        if len(obs_shape) != 1 or framework != "torch":
            raise ValueError(
                "model.q_encoder: concat needs flat (1-D) Box observations and torch, got "
                f"{self.observation_space} ({framework})"
            )
        hiddens = list(model_config["fcnet_hiddens"])
        activation = model_config["fcnet_activation"]
        mlp = MLPEncoderConfig(
            input_dims=[obs_shape[0] + int(self.action_space.shape[0])],
            hidden_layer_dims=hiddens[:-1],
            hidden_layer_activation=activation,
            output_layer_dim=self.latent_dims[0],
            output_layer_activation=activation,
        ).build(framework=framework)
        return ConcatQEncoder(mlp)


class TunerSACConfig(SACConfig):
    """SACConfig whose default RLModule builds with TunerSACCatalog and whose default
    torch Learner logs the loss's metrics once per reduce (_lean_metrics)."""

    def get_default_rl_module_spec(self) -> Any:
        spec = super().get_default_rl_module_spec()
        spec.catalog_class = TunerSACCatalog
        return spec

    def get_default_learner_class(self) -> Any:
        """The lean Learner for torch, RLlib's otherwise or with TUNER_LEAN_LOSS=0.

        Returns:
            The Learner class.
        """
        from tuner.rllib._lean_metrics import lean_learner_class

        return lean_learner_class(self, super().get_default_learner_class())
