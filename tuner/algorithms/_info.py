"""The model of one algorithm or preset as `GET /algorithms` shows it: the registry's
entries (tuner/algorithms/_registry.py) are these."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class AlgorithmInfo(BaseModel):
    """An algorithm or preset users can name in `algorithm` (`GET /algorithms`)."""

    model_config = ConfigDict(from_attributes=True, protected_namespaces=())

    name: str
    base_algorithm: str
    doc: str | None = None
    actions: list[str] = Field(
        default_factory=list, description="Action spaces it handles: discrete, continuous."
    )
    gpu_learner: bool = Field(False, description="Its learner can train on a GPU.")
    lstm: bool = Field(False, description="It trains recurrent (use_lstm) models.")
    preset_config: dict[str, Any] = Field(
        default_factory=dict, description="Settings the preset fixes (the spec's `config` wins)."
    )
    performance_defaults: dict[str, Any] = Field(
        default_factory=dict,
        description="Settings that make small trials fast without changing the update ratio "
        "or the batch (the spec's `config` wins); `num_envs_per_env_runner` (PPO: the most, each "
        "env sampling 32+ steps of a batch) applies where the spec sets no env count, "
        "fragment or batch_mode and runs one agent on a flat gymnasium env.",
    )
    flat_replay_defaults: dict[str, Any] = Field(
        default_factory=dict,
        description="Performance defaults used instead of `performance_defaults` where the "
        "trials take the flat replay path (DQN), the spec sets neither "
        "`rollout_fragment_length` nor `resources.num_envs_per_env_runner`; the update ratio "
        "is held.",
    )
    default_space: dict[str, Any] = Field(default_factory=dict)
    space_source: str | None = Field(None, description="Where the default space comes from.")
    space_reasons: dict[str, str] = Field(
        default_factory=dict, description="Why each default-space key is searched so."
    )
    space_budget: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="Rules that narrow default-space keys to a trial's budget "
        "(stop.timesteps_total): min_updates, at_most, at_most_fraction, schedule.",
    )
    warnings: list[str] = Field(default_factory=list)
