"""The lean DQN exploration pass (tuner/rllib/_lean_exploration.py): the same actions as
RLlib's own pass from the same torch generator state, only for RLlib's DQN module."""

from __future__ import annotations

import gymnasium as gym
import pytest
import torch
from ray.rllib.algorithms.dqn import DQNConfig
from ray.rllib.algorithms.dqn.torch.default_dqn_torch_rl_module import (
    DefaultDQNTorchRLModule,
)
from ray.rllib.core.columns import Columns

from tuner.rllib._lean_exploration import install_lean_exploration, lean_exploration_fits


def _module(module_class=None):
    env = gym.make("CartPole-v1")
    config = DQNConfig().environment("CartPole-v1").training(epsilon=[[0, 1.0], [100, 0.05]])
    spec = config.get_default_rl_module_spec()
    if module_class is not None:
        spec.module_class = module_class
    spec.observation_space, spec.action_space = env.observation_space, env.action_space
    spec.model_config = {**config.model_config, "fcnet_hiddens": [16]}
    torch.manual_seed(0)
    return spec.build()


@pytest.mark.parametrize("t", [0, 50, 1000], ids=["epsilon-1", "epsilon-decaying", "epsilon-final"])
def test_the_lean_pass_draws_rllibs_actions(t):
    rllibs, lean = _module(), _module()
    lean.set_state(rllibs.get_state())
    assert install_lean_exploration(lean)
    obs = torch.randn(64, 4, generator=torch.Generator().manual_seed(1))
    actions = {}
    for name, module in (("rllib", rllibs), ("lean", lean)):
        torch.manual_seed(7)
        out = module.forward_exploration({Columns.OBS: obs}, t=t)
        actions[name] = out[Columns.ACTIONS]
        assert set(out) == {Columns.ACTIONS}
        epsilon = float(module.epsilon_schedule.get_current_value())
        assert epsilon == pytest.approx({0: 1.0, 50: 0.525, 1000: 0.05}[t])
    assert actions["lean"].dtype == actions["rllib"].dtype
    assert torch.equal(actions["lean"], actions["rllib"])
    # both the greedy and the random branch were taken at a middle epsilon
    greedy = torch.argmax(lean.compute_q_values({Columns.OBS: obs})["qf_preds"], dim=-1)
    if t == 50:
        assert 0 < int((actions["lean"] == greedy).sum()) < 64


def test_only_rllibs_own_dqn_module_takes_it():
    class OwnDQNModule(DefaultDQNTorchRLModule):
        pass

    assert lean_exploration_fits(_module())
    own = _module(OwnDQNModule)
    assert not lean_exploration_fits(own)
    assert not install_lean_exploration(own)
    assert "_forward_exploration" not in vars(own)
