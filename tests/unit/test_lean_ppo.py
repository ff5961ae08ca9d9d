"""The lean PPO loss (tuner/rllib/_lean_ppo.py) makes the same updates as RLlib's
PPOTorchLearner: the same loss value, the same gradients and the same reported metrics
on a fixed batch; a spec's own learner_class, or TUNER_LEAN_LOSS=0, keeps its own."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.algorithms.ppo.torch.ppo_torch_learner import PPOTorchLearner
from ray.rllib.core.columns import Columns
from ray.rllib.evaluation.postprocessing import Postprocessing

from tuner.rllib import build_config
from tuner.spec import parse_spec

MODULE = "default_policy"
METRICS = (
    "policy_loss",
    "vf_loss",
    "vf_loss_unclipped",
    "vf_explained_var",
    "entropy",
    "mean_kl_loss",
)


def learner_of(config: PPOConfig):
    learner = config.build_learner(env=gym.make("CartPole-v1"))
    return learner


def configs(use_kl_loss: bool) -> tuple[PPOConfig, PPOConfig]:
    spec = parse_spec({"name": "lean", "algorithm": "PPO", "env": "CartPole-v1", "seed": 3})
    lean = build_config(spec).training(use_kl_loss=use_kl_loss, entropy_coeff=0.01)
    lean = lean.learners(num_learners=0).rl_module(model_config={"fcnet_hiddens": [16]})
    own = lean.copy(copy_frozen=False).training(learner_class=PPOTorchLearner)
    return lean, own


def batch(n: int = 64) -> dict[str, torch.Tensor]:
    rng = np.random.default_rng(0)
    mask = rng.random(n) > 0.2
    return {
        Columns.OBS: torch.tensor(rng.normal(size=(n, 4)), dtype=torch.float32),
        Columns.ACTIONS: torch.tensor(rng.integers(0, 2, size=n)),
        Columns.ACTION_LOGP: torch.tensor(
            np.log(rng.uniform(0.3, 0.7, size=n)), dtype=torch.float32
        ),
        Columns.ACTION_DIST_INPUTS: torch.tensor(rng.normal(size=(n, 2)), dtype=torch.float32),
        Postprocessing.ADVANTAGES: torch.tensor(rng.normal(size=n), dtype=torch.float32),
        Postprocessing.VALUE_TARGETS: torch.tensor(rng.normal(size=n), dtype=torch.float32),
        Columns.LOSS_MASK: torch.tensor(mask),
    }


def loss_and_grads(learner, data):
    module = learner.module[MODULE]
    for p in module.parameters():
        p.grad = None
    fwd = module.forward_train(data)
    config = learner.config.get_config_for_module(MODULE)
    loss = learner.compute_loss_for_module(module_id=MODULE, config=config, batch=data, fwd_out=fwd)
    loss.backward()
    grads = [p.grad.clone() for p in module.parameters()]
    return loss.detach(), grads


@pytest.mark.parametrize("use_kl_loss", [True, False])
def test_the_lean_loss_gives_rllibs_loss_gradients_and_metrics(use_kl_loss):
    lean_config, own_config = configs(use_kl_loss)
    lean, own = learner_of(lean_config), learner_of(own_config)
    assert type(lean).__name__ == "LeanPPOTorchLearner"
    assert type(own) is PPOTorchLearner
    own.module[MODULE].load_state_dict(lean.module[MODULE].state_dict())
    data = batch()
    lean_loss, lean_grads = loss_and_grads(lean, data)
    own_loss, own_grads = loss_and_grads(own, data)
    assert torch.allclose(lean_loss, own_loss, rtol=1e-6, atol=1e-7)
    assert len(lean_grads) == len(own_grads)
    for a, b in zip(lean_grads, own_grads, strict=True):
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-7)
    # RLlib logs the metrics in the loss; the lean one once the update ends
    lean.after_gradient_based_update(timesteps={})
    own.after_gradient_based_update(timesteps={})
    for key in METRICS:
        got = float(lean.metrics.peek((MODULE, key)))
        want = float(own.metrics.peek((MODULE, key)))
        assert got == pytest.approx(want, rel=1e-5, abs=1e-7), key
    # the KL coefficient moved the same way (it reads the KL logged above)
    assert float(lean.curr_kl_coeffs_per_module[MODULE]) == pytest.approx(
        float(own.curr_kl_coeffs_per_module[MODULE])
    )


def test_a_specs_own_learner_class_and_the_switch_keep_rllibs(monkeypatch):
    lean_config, own_config = configs(True)
    assert lean_config.learner_class.__name__ == "LeanPPOTorchLearner"
    assert own_config.learner_class is PPOTorchLearner
    monkeypatch.setenv("TUNER_LEAN_LOSS", "0")
    assert lean_config.learner_class is PPOTorchLearner


def _leaves(results, prefix=()):
    for key, value in results.items():
        if isinstance(value, dict):
            yield from _leaves(value, (*prefix, key))
        else:
            yield (*prefix, key), value


@pytest.mark.parametrize("use_kl_loss", [True, False])
def test_a_whole_update_reports_what_rllibs_learner_reports(use_kl_loss):
    """Three epochs of minibatches through RLlib's PPOTorchLearner and the lean one (its
    minibatches' log calls kept and logged once, the off-policyness computed for the last
    minibatch): every reported value the same (step counters, gradient norms,
    off-policyness, losses, the KL coefficient), and the same weights."""
    from ray.rllib.policy.sample_batch import MultiAgentBatch, SampleBatch
    from ray.rllib.utils.metrics import NUM_ENV_STEPS_SAMPLED_LIFETIME, WEIGHTS_SEQ_NO

    lean_config, own_config = configs(use_kl_loss)
    runs = {}
    for name, config in (("lean", lean_config), ("own", own_config)):
        # clipped by the global norm: each minibatch logs its gradients' norm (window=1)
        config = config.copy(copy_frozen=False).training(grad_clip=0.5, grad_clip_by="global_norm")
        torch.manual_seed(0)
        learner = learner_of(config)
        results = None
        for update in range(2):  # the second update: counters and EMAs carry over
            np.random.seed(7 + update)
            data = batch(300)
            data[WEIGHTS_SEQ_NO] = torch.full((300,), update, dtype=torch.int64)
            results = learner.update(
                batch=MultiAgentBatch({MODULE: SampleBatch(data)}, env_steps=300),
                timesteps={NUM_ENV_STEPS_SAMPLED_LIFETIME: 300 * (update + 1)},
                num_epochs=3,
                minibatch_size=64,
                shuffle_batch_per_epoch=True,
            )
        reported = {
            key: float(stat.peek())
            for key, stat in _leaves(results)
            if not any(word in str(key) for word in ("throughput", "timer", "time"))
        }
        state = {k: v.clone() for k, v in learner.module[MODULE].state_dict().items()}
        runs[name] = (type(learner).__name__, reported, state)
    (lean_name, lean_m, lean_w), (own_name, own_m, own_w) = runs["lean"], runs["own"]
    assert (lean_name, own_name) == ("LeanPPOTorchLearner", "PPOTorchLearner")
    assert lean_m.keys() == own_m.keys()
    assert (MODULE, "diff_num_grad_updates_vs_sampler_policy") in own_m
    assert (MODULE, "num_module_steps_trained") in own_m
    assert (MODULE, "gradients_default_optimizer_global_norm") in own_m
    for key, value in own_m.items():
        assert lean_m[key] == pytest.approx(value, rel=1e-4, abs=1e-6, nan_ok=True), key
    for key, value in own_w.items():  # the lean loss's masked means round differently
        assert torch.allclose(lean_w[key], value, rtol=1e-4, atol=1e-6), key
