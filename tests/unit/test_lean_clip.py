"""The lean gradient step's global-norm clip (tuner.ray_internals.lean_cpu_steps) clips
as RLlib's `clip_gradients` does: gradients under the clip left as they are (without
RLlib's coefficient ops), at or over it scaled by RLlib's coefficient, and the same
global norm logged."""

from __future__ import annotations

import pytest
import torch
from ray.rllib.utils.torch_utils import clip_gradients

from tests.unit.test_lean_metrics import _config
from tuner.ray_internals import lean_cpu_steps

CLIP = 1.0


def _learner():
    import gymnasium as gym

    config = _config("DQN").learners(num_learners=0).training(grad_clip=CLIP)
    config = config.rl_module(model_config={"fcnet_hiddens": [8]})
    torch.manual_seed(0)
    return config.build_learner(env=gym.make("CartPole-v1"))


def _grads(learner, norm: float) -> dict:
    """Gradients for every trained parameter of the module (not the target net's), of
    global norm `norm`."""
    params = [
        p for p in learner.get_parameters(learner.module["default_policy"]) if p.requires_grad
    ]
    raw = [torch.randn_like(p) for p in params]
    scale = norm / torch.linalg.vector_norm(torch.cat([g.ravel() for g in raw])).item()
    return {learner.get_param_ref(p): g * scale for p, g in zip(params, raw, strict=True)}


@pytest.mark.parametrize("norm", [0.3, CLIP * (1 - 1e-7), CLIP, 5.0])
def test_the_lean_clip_clips_as_rllibs(norm):
    learner = _learner()
    assert lean_cpu_steps(learner)
    grads = _grads(learner, norm)
    expected = {ref: g.clone() for ref, g in grads.items()}
    rllib_norm = clip_gradients(expected, grad_clip=CLIP, grad_clip_by="global_norm")
    config = learner.config.get_config_for_module("default_policy")
    clipped = learner.postprocess_gradients_for_module(
        module_id="default_policy", config=config, module_gradients_dict=grads
    )
    assert len(clipped) == len(expected)
    for ref, grad in expected.items():  # keyed by the parameters themselves
        torch.testing.assert_close(clipped[ref], grad, rtol=1e-6, atol=0.0)
    logged = learner.metrics.peek(("default_policy", "gradients_default_optimizer_global_norm"))
    assert float(logged) == pytest.approx(float(rllib_norm), rel=1e-6)
    total = torch.linalg.vector_norm(torch.cat([g.ravel() for g in clipped.values()])).item()
    assert total == pytest.approx(min(norm, CLIP), rel=1e-5)


def test_gradients_under_the_clip_are_left_as_they_were():
    learner = _learner()
    assert lean_cpu_steps(learner)
    grads = _grads(learner, 0.3)
    before = {ref: g.clone() for ref, g in grads.items()}
    config = learner.config.get_config_for_module("default_policy")
    learner.postprocess_gradients_for_module(
        module_id="default_policy", config=config, module_gradients_dict=grads
    )
    for ref, grad in grads.items():
        assert torch.equal(grad, before[ref])
