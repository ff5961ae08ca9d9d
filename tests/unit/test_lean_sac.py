"""The lean SAC update (tuner/rllib/_lean_sac.py): on the same fixed batches it makes
RLlib's updates bit for bit, with or without a twin Q-network, and what it does not
cover (discrete actions, several modules, several Learners, torch.compile, a module of
one's own) runs RLlib's own update."""

from __future__ import annotations

import hashlib
import importlib
import inspect

import gymnasium as gym
import numpy as np
import pytest
import torch
from ray.rllib.algorithms.sac.torch.sac_torch_learner import SACTorchLearner
from ray.rllib.core.columns import Columns
from ray.rllib.policy.sample_batch import MultiAgentBatch, SampleBatch
from ray.rllib.utils.metrics import NUM_ENV_STEPS_SAMPLED_LIFETIME

from tests.lean_compare import assert_reported_alike
from tuner import ray_internals
from tuner.rllib import _lean_sac, build_config
from tuner.rllib._lean_metrics import DeferredUpdateMetrics, LeanSACTorchLearner
from tuner.spec import parse_spec


class MetricsOnlyLearner(DeferredUpdateMetrics, SACTorchLearner):
    """RLlib's SAC update with the lean Learner's deferred metrics only (the comparison)."""


def _learner(
    learner_class: type | None,
    twin_q: bool = True,
    env: str = "Pendulum-v1",
    q_encoder: str = "concat",
):
    config = build_config(parse_spec({"name": "lean-sac", "algorithm": "SAC", "env": env}))
    model = {"fcnet_hiddens": [16], "q_encoder": q_encoder}
    config = config.learners(num_learners=0).rl_module(model_config=model)
    config = config.training(twin_q=twin_q, tau=0.3, target_network_update_freq=0)
    if learner_class is not None:
        config = config.learners(learner_class=learner_class)
    torch.manual_seed(0)
    return config.build_learner(env=gym.make(env))


def _batch(step: int, n: int = 32) -> MultiAgentBatch:
    """A fixed batch of tensors, as the flat replay path hands it to the Learner."""
    rng = np.random.default_rng(step)
    columns = {
        Columns.OBS: rng.normal(size=(n, 3)).astype(np.float32),
        Columns.NEXT_OBS: rng.normal(size=(n, 3)).astype(np.float32),
        Columns.ACTIONS: rng.uniform(-2, 2, size=(n, 1)).astype(np.float32),
        Columns.REWARDS: rng.normal(size=n).astype(np.float32),
        Columns.TERMINATEDS: rng.random(n) < 0.2,
        Columns.TRUNCATEDS: np.zeros(n, dtype=bool),
        "n_step": np.ones(n, dtype=np.int64),
        "weights": rng.uniform(0.5, 1.5, size=n).astype(np.float32),
    }
    tensors = {key: torch.as_tensor(value) for key, value in columns.items()}
    return MultiAgentBatch({"default_policy": SampleBatch(tensors)}, env_steps=n)


def _counting(monkeypatch) -> dict[str, int]:
    """Counts the lean forward passes and the lean backward passes."""
    counts = {"forward": 0, "backward": 0}
    forward, gradients = _lean_sac.sac_forward_train, _lean_sac.LeanSACLoss.compute_gradients

    def counted_forward(*args):
        counts["forward"] += 1
        return forward(*args)

    def counted_gradients(self, loss_per_module, **kwargs):
        counts["backward"] += int(bool(self.__dict__.get(_lean_sac.LOSSES)))
        return gradients(self, loss_per_module, **kwargs)

    monkeypatch.setattr(_lean_sac, "sac_forward_train", counted_forward)
    monkeypatch.setattr(_lean_sac.LeanSACLoss, "compute_gradients", counted_gradients)
    return counts


def _reported(results) -> dict:
    return {
        (mid, key): stat.peek()
        for mid, stats in results.items()
        for key, stat in stats.items()
        if "throughput" not in key and "timer" not in key
    }


@pytest.mark.parametrize("q_encoder", ["concat", "multi_stream"])
@pytest.mark.parametrize("twin_q", [True, False], ids=["twin", "single"])
def test_update_by_update_the_lean_sac_update_is_rllibs(monkeypatch, twin_q, q_encoder):
    counts = _counting(monkeypatch)
    own = _learner(MetricsOnlyLearner, twin_q, q_encoder=q_encoder)
    lean = _learner(None, twin_q, q_encoder=q_encoder)
    assert type(lean) is LeanSACTorchLearner
    lean.module.set_state(own.module.get_state())
    for step in range(5):
        timesteps = {NUM_ENV_STEPS_SAMPLED_LIFETIME: 100 * (step + 1)}
        results = []
        for learner in (own, lean):
            torch.manual_seed(step)  # SAC samples its actions in the loss
            results.append(learner.update(batch=_batch(step), timesteps=timesteps))
        theirs, ours = (_reported(r) for r in results)
        assert (("default_policy", "qf_twin_loss") in ours) is twin_q
        assert_reported_alike(theirs, ours)
    assert counts == {"forward": 5, "backward": 5}
    own_state = own.module["default_policy"].state_dict()
    lean_state = lean.module["default_policy"].state_dict()
    assert own_state.keys() == lean_state.keys()
    for key in own_state:
        assert torch.equal(own_state[key], lean_state[key]), key
    alphas = (own.curr_log_alpha["default_policy"], lean.curr_log_alpha["default_policy"])
    assert torch.equal(*alphas)


def test_the_updates_moved_every_network(monkeypatch):
    """The comparison above compares updates that did something: every trained network
    and the temperature moved."""
    lean = _learner(None)
    before = {k: v.clone() for k, v in lean.module["default_policy"].state_dict().items()}
    alpha = lean.curr_log_alpha["default_policy"].detach().clone()
    lean.update(batch=_batch(0), timesteps={NUM_ENV_STEPS_SAMPLED_LIFETIME: 100})
    after = lean.module["default_policy"].state_dict()
    for prefix in ("pi.", "qf.", "qf_twin.", "target_qf."):
        moved = [k for k in after if k.startswith(prefix) and not torch.equal(after[k], before[k])]
        assert moved, prefix
    assert not torch.equal(lean.curr_log_alpha["default_policy"], alpha)


def test_discrete_actions_run_rllibs_update(monkeypatch):
    counts = _counting(monkeypatch)
    lean = _learner(None, env="CartPole-v1")
    assert _lean_sac.lean_sac_module(lean, "default_policy") is None
    rng = np.random.default_rng(0)
    n = 16
    columns = {
        Columns.OBS: torch.as_tensor(rng.normal(size=(n, 4)).astype(np.float32)),
        Columns.NEXT_OBS: torch.as_tensor(rng.normal(size=(n, 4)).astype(np.float32)),
        Columns.ACTIONS: torch.as_tensor(rng.integers(0, 2, size=n)),
        Columns.REWARDS: torch.ones(n),
        Columns.TERMINATEDS: torch.zeros(n, dtype=torch.bool),
        Columns.TRUNCATEDS: torch.zeros(n, dtype=torch.bool),
        "n_step": torch.ones(n, dtype=torch.int64),
        "weights": torch.ones(n),
    }
    batch = MultiAgentBatch({"default_policy": SampleBatch(columns)}, env_steps=n)
    results = lean.update(batch=batch, timesteps={NUM_ENV_STEPS_SAMPLED_LIFETIME: 100})
    assert "qf_loss" in results["default_policy"]
    assert counts == {"forward": 0, "backward": 0}


def _masked(step: int) -> MultiAgentBatch:
    batch = _batch(step)
    module_batch = batch.policy_batches["default_policy"]
    module_batch[Columns.LOSS_MASK] = torch.ones(len(module_batch[Columns.REWARDS]), dtype=bool)
    return batch


def _updated_alike(own, lean, batch: MultiAgentBatch) -> None:
    """One update of each on the same batch and seed: the same weights after it."""
    timesteps = {NUM_ENV_STEPS_SAMPLED_LIFETIME: 100}
    for learner in (own, lean):
        torch.manual_seed(1)
        results = learner.update(batch=batch.copy(), timesteps=timesteps)
        assert "qf_loss" in results["default_policy"]
    own_state = own.module["default_policy"].state_dict()
    lean_state = lean.module["default_policy"].state_dict()
    for key in own_state:
        assert torch.equal(own_state[key], lean_state[key]), key


@pytest.mark.parametrize("change", ["compiled", "loss mask", "own module"])
def test_what_the_lean_update_does_not_cover_runs_rllibs(monkeypatch, change):
    """Each runs RLlib's own loss and backward passes (or its whole update) to the end,
    and updates as RLlib's Learner does."""
    counts = _counting(monkeypatch)
    own, lean = _learner(MetricsOnlyLearner), _learner(None)
    lean.module.set_state(own.module.get_state())
    batch = _masked(0) if change == "loss mask" else _batch(0)
    if change == "compiled":
        monkeypatch.setattr(lean.config, "torch_compile_learner", True, raising=False)
        assert lean.tuner_lean_update(batch.copy().policy_batches) is None
    elif change == "own module":
        module = lean.module["default_policy"]
        monkeypatch.setattr(module, "__class__", type("OwnSACModule", (type(module),), {}))
    if change != "loss mask":
        assert _lean_sac.lean_sac_module(lean, "default_policy") is None
    _updated_alike(own, lean, batch)
    # the loss mask keeps the lean forward pass (RLlib's reads no mask), not the backward
    assert counts == {"forward": int(change == "loss mask"), "backward": 0}


def test_several_learners_run_rllibs_update(monkeypatch):
    lean = _learner(None)
    monkeypatch.setattr(lean.config, "num_learners", 2, raising=False)
    assert lean.tuner_lean_update(_batch(0).policy_batches) is None
    assert _lean_sac.lean_sac_module(lean, "default_policy") is None


def test_a_lean_loss_whose_update_stopped_short_is_not_used_later():
    """Losses kept by a lean loss whose update never reached its gradients (it raised)
    are dropped by the next loss: a following update that falls back (a loss mask) makes
    RLlib's update, not a backward pass of the old losses."""
    own, lean = _learner(MetricsOnlyLearner), _learner(None)
    lean.module.set_state(own.module.get_state())
    old = _batch(9).policy_batches["default_policy"]
    config = lean.config.get_config_for_module("default_policy")
    fwd_out = lean.module["default_policy"].forward_train(old)
    lean.compute_loss_for_module(
        module_id="default_policy", config=config, batch=old, fwd_out=fwd_out
    )
    assert lean.__dict__[_lean_sac.LOSSES]  # left behind
    _updated_alike(own, lean, _masked(1))


@pytest.mark.parametrize("name", sorted(_lean_sac.RLLIB_SOURCES))
def test_the_lean_sac_update_follows_the_installed_rllib(name):
    """A Ray whose SAC forward pass, loss, gradients or optimizers changed fails here
    until tuner/rllib/_lean_sac.py is checked against it again."""
    owner, method = name.split(".")
    module = importlib.import_module(_lean_sac.RLLIB_MODULES[owner])
    source = inspect.getsource(getattr(getattr(module, owner), method))
    digest = hashlib.sha256(source.encode()).hexdigest()
    assert digest == _lean_sac.RLLIB_SOURCES[name], f"{name} changed: check the lean SAC update"


def test_the_lean_torch_update_follows_the_installed_rllib():
    """ray_internals.lean_torch_update takes TorchLearner._uncompiled_update's steps."""
    from ray.rllib.core.learner.torch.torch_learner import TorchLearner

    source = inspect.getsource(TorchLearner._uncompiled_update)
    assert hashlib.sha256(source.encode()).hexdigest() == ray_internals.TORCH_UPDATE_SOURCE
