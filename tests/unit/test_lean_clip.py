"""The lean gradient step's global-norm clip (tuner.ray_internals.lean_cpu_steps) clips
as RLlib's `clip_gradients` does: under the clip bit for bit (for a grad_clip whose
coefficient there is exactly 1 without RLlib's coefficient ops; for one whose
coefficient is a float32 step below 1, such as 41 or 0.99, scaled by it), at or over it
scaled by RLlib's coefficient, and the same global norm logged."""

from __future__ import annotations

import pytest
import torch
from ray.rllib.utils.torch_utils import clip_gradients

from tests.unit.test_lean_metrics import _config
from tuner.ray_internals import lean_cpu_steps

# 1 and 10: RLlib's coefficient under the clip is exactly 1; 41 and 0.99: 0.99999994
CLIPS = [1.0, 10.0, 41.0, 0.99]


def _learner(clip: float):
    import gymnasium as gym

    config = _config("DQN").learners(num_learners=0).training(grad_clip=clip)
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


def _clipped(clip: float, norm: float) -> tuple[dict, dict, float, float]:
    """The lean clip's gradients and logged norm, and RLlib's on a copy."""
    learner = _learner(clip)
    assert lean_cpu_steps(learner)
    grads = _grads(learner, norm)
    expected = {ref: g.clone() for ref, g in grads.items()}
    rllib_norm = clip_gradients(expected, grad_clip=clip, grad_clip_by="global_norm")
    config = learner.config.get_config_for_module("default_policy")
    clipped = learner.postprocess_gradients_for_module(
        module_id="default_policy", config=config, module_gradients_dict=grads
    )
    assert len(clipped) == len(expected)
    logged = learner.metrics.peek(("default_policy", "gradients_default_optimizer_global_norm"))
    return clipped, expected, float(logged), float(rllib_norm)


@pytest.mark.parametrize("clip", CLIPS)
def test_under_the_clip_the_gradients_are_rllibs_bit_for_bit(clip):
    clipped, expected, logged, rllib_norm = _clipped(clip, 0.3 * clip)
    for ref, grad in expected.items():  # keyed by the parameters themselves
        assert torch.equal(clipped[ref], grad)
    assert logged == pytest.approx(rllib_norm, rel=1e-6)


@pytest.mark.parametrize("clip", CLIPS)
@pytest.mark.parametrize("factor", [1 - 1e-7, 1.0, 5.0])
def test_at_or_over_the_clip_the_gradients_are_scaled_as_rllibs(clip, factor):
    clipped, expected, logged, rllib_norm = _clipped(clip, factor * clip)
    for ref, grad in expected.items():
        torch.testing.assert_close(clipped[ref], grad, rtol=1e-6, atol=0.0)
    assert logged == pytest.approx(rllib_norm, rel=1e-6)
    total = torch.linalg.vector_norm(torch.cat([g.ravel() for g in clipped.values()])).item()
    assert total == pytest.approx(min(factor, 1.0) * clip, rel=1e-5)
