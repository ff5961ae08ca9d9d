"""SAC's `model.q_encoder: concat` (tuner/rllib/_sac_model.py): each Q-network one MLP
over [obs, action], SB3's critic shape; a sweep's SAC defaults to it
(`auto`: on flat observations), RLlib's multi-stream encoder where asked for or on images."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from ray.rllib.core.columns import Columns

from tuner.rllib._trainables import TunerSAC
from tuner.spec import SpecError, parse_spec
from tuner.validation import validate_spec

SB3_SHAPE = {"fcnet_hiddens": [256, 256], "fcnet_activation": "relu", "head_fcnet_hiddens": []}


def module(model: dict, env: str = "Pendulum-v1"):
    config = TunerSAC.get_default_config().environment(env).rl_module(model_config=model)
    return config.get_multi_rl_module_spec(env=gym.make(env)).build()["default_policy"]


def trainable(mod) -> int:
    return sum(p.numel() for p in mod.parameters() if p.requires_grad)


def sb3_sac_params(obs: int, act: int, hidden: int = 256) -> int:
    """stable-baselines3's default SAC: actor obs-256-256 then mean and log_std heads,
    two critics (obs + act)-256-256-1 (its targets are not trained)."""
    mlp = lambda i: i * hidden + hidden + hidden * hidden + hidden  # noqa: E731
    return mlp(obs) + 2 * (hidden * act + act) + 2 * (mlp(obs + act) + hidden + 1)


def test_concat_builds_sb3s_networks_exactly():
    mod = module({**SB3_SHAPE, "q_encoder": "concat"})
    assert type(mod.qf_encoder).__name__ == "ConcatQEncoder"
    assert trainable(mod) == sb3_sac_params(obs=3, act=1) == 201_988
    default = module(SB3_SHAPE)  # RLlib's own multi-stream encoder, unchanged
    assert type(default.qf_encoder).__name__ == "TorchMultiStreamEncoder"
    assert trainable(default) > 6 * trainable(mod)


def test_the_q_value_depends_on_observation_and_action():
    mod = module({**SB3_SHAPE, "q_encoder": "concat"})
    obs = torch.tensor(np.random.default_rng(0).normal(size=(5, 3)), dtype=torch.float32)
    actions = torch.zeros(5, 1)
    q = mod.compute_q_values({Columns.OBS: obs, Columns.ACTIONS: actions})
    assert q.shape == (5,)
    moved = mod.compute_q_values({Columns.OBS: obs, Columns.ACTIONS: actions + 1.0})
    assert not torch.allclose(q, moved)
    assert not torch.allclose(q[0], q[1])


def test_image_observations_are_refused_with_the_reason():
    from tuner.rllib._sac_model import TunerSACCatalog

    catalog = TunerSACCatalog(
        gym.spaces.Box(0, 1, (8, 8, 3)),
        gym.spaces.Box(-1, 1, (1,)),
        {**SB3_SHAPE, "q_encoder": "concat", "conv_filters": [[4, [8, 8], 1]]},
    )
    with pytest.raises(ValueError, match="flat"):
        catalog.build_qf_encoder(framework="torch")


def spec(algorithm: str, **patch):
    env = "Pendulum-v1" if algorithm == "SAC" else "CartPole-v1"
    return parse_spec({"name": "q", "algorithm": algorithm, "env": env, **patch})


@pytest.mark.parametrize(
    "algorithm, patch, loc",
    [
        ("PPO", {"model": {"q_encoder": "concat"}}, "model.q_encoder"),
        ("SAC", {"model": {"q_encoder": "fused"}}, "model.q_encoder"),
        (
            "SAC",
            {"search": {"space": {"model.q_encoder": {"choice": ["concat", "fused"]}}}},
            "search.space.model.q_encoder",
        ),
    ],
)
def test_a_wrong_q_encoder_is_refused_naming_the_field(algorithm, patch, loc):
    with pytest.raises(SpecError) as err:
        validate_spec(spec(algorithm, **patch), build_env=False)
    assert [issue.loc for issue in err.value.issues] == [loc]


def test_both_q_encoders_are_accepted_fixed_or_searched():
    validate_spec(spec("SAC", model={"q_encoder": "concat"}), build_env=False)
    space = {"model.q_encoder": {"choice": ["multi_stream", "concat"]}}
    validate_spec(spec("SAC", search={"space": space}), build_env=False)


def test_a_sweeps_sac_defaults_to_sb3s_networks_and_the_spec_wins():
    from tuner.rllib import build_config

    built = build_config(spec("SAC")).model_config
    assert built["q_encoder"] == "auto"
    assert built["fcnet_activation"] == "relu"
    own = build_config(spec("SAC", model={"q_encoder": "multi_stream", "fcnet_activation": "tanh"}))
    assert own.model_config["q_encoder"] == "multi_stream"
    assert own.model_config["fcnet_activation"] == "tanh"
    assert "q_encoder" not in build_config(spec("PPO")).model_config


def test_auto_is_concat_on_flat_observations_and_rllibs_own_on_images():
    flat = module({"q_encoder": "auto", "fcnet_activation": "relu"})
    assert type(flat.qf_encoder).__name__ == "ConcatQEncoder"
    assert trainable(flat) == sb3_sac_params(obs=3, act=1)  # SB3's default SAC, exactly
    from tuner.rllib._sac_model import TunerSACCatalog

    catalog = TunerSACCatalog(
        gym.spaces.Box(0, 1, (8, 8, 3)),
        gym.spaces.Box(-1, 1, (1,)),
        {**SB3_SHAPE, "q_encoder": "auto", "conv_filters": [[4, [8, 8], 1]]},
    )
    encoder = catalog.build_qf_encoder(framework="torch")
    assert type(encoder).__name__ != "ConcatQEncoder"
