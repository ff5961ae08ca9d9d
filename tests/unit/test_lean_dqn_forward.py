"""The lean double-Q forward pass (tuner/rllib/_lean_dqn.py, `tuner_lean_update`): on
the same fixed batches the lean DQN Learner makes RLlib's updates bit for bit, with or
without a dueling head, the next observations' passes carry no autograd graph, and what
it does not cover (single Q, a distributional head, several Learners, torch.compile, a
module of one's own, a batch with states) runs RLlib's forward pass."""

from __future__ import annotations

import hashlib
import importlib
import inspect

import gymnasium as gym
import pytest
import torch
from ray.rllib.algorithms.dqn.dqn_learner import QF_NEXT_PREDS, QF_PREDS, QF_TARGET_NEXT_PREDS
from ray.rllib.algorithms.dqn.torch.dqn_torch_learner import DQNTorchLearner
from ray.rllib.core.columns import Columns
from ray.rllib.utils.metrics import NUM_ENV_STEPS_SAMPLED_LIFETIME

from tests.lean_compare import assert_reported_alike
from tests.unit.test_lean_metrics import _as_tensors, _batch, _config, _reported
from tuner.rllib import _lean_dqn
from tuner.rllib._lean_metrics import DeferredUpdateMetrics, LeanDQNTorchLearner


class MetricsOnlyLearner(DeferredUpdateMetrics, DQNTorchLearner):
    """RLlib's DQN update with the lean Learner's deferred metrics only (the comparison)."""


def _learner(learner_class: type | None, **training):
    config = _config("DQN").learners(num_learners=0)
    config = config.rl_module(model_config={"fcnet_hiddens": [64, 64]})
    # the target synced after every update: the comparison covers the target's values too
    config = config.training(target_network_update_freq=0, **training)
    if learner_class is not None:
        config = config.learners(learner_class=learner_class)
    torch.manual_seed(0)
    return config.build_learner(env=gym.make("CartPole-v1"))


def _counting(monkeypatch) -> list[int]:
    calls: list[int] = []
    real = _lean_dqn.dqn_forward_train
    monkeypatch.setattr(_lean_dqn, "dqn_forward_train", lambda *a: calls.append(1) or real(*a))
    return calls


def _updated_alike(own, lean, steps: int = 5, n: int = 128) -> None:
    """Update by update on the same batches: the same reported stats, then the same
    weights (online and target)."""
    pair = (own, lean)
    for step in range(steps):
        timesteps = {NUM_ENV_STEPS_SAMPLED_LIFETIME: 100 * (step + 1)}
        batch = _as_tensors(_batch("DQN", step, n))
        results = [learner.update(batch=batch.copy(), timesteps=timesteps) for learner in pair]
        theirs, ours = (_reported(r) for r in results)
        assert theirs[("default_policy", "qf_loss")] > 0
        assert_reported_alike(theirs, ours)
    own_state = own.module["default_policy"].state_dict()
    lean_state = lean.module["default_policy"].state_dict()
    assert own_state.keys() == lean_state.keys()
    for key in own_state:
        assert torch.equal(own_state[key], lean_state[key]), key


@pytest.mark.parametrize("dueling", [True, False], ids=["dueling", "plain-head"])
def test_update_by_update_the_lean_forward_makes_rllibs_updates(monkeypatch, dueling):
    calls = _counting(monkeypatch)
    own, lean = _learner(MetricsOnlyLearner, dueling=dueling), _learner(None, dueling=dueling)
    assert type(lean) is LeanDQNTorchLearner
    lean.module.set_state(own.module.get_state())
    _updated_alike(own, lean)
    assert calls == [1] * 5


def test_the_updates_moved_the_online_and_the_target_network():
    """The comparison above compares updates that did something."""
    lean = _learner(None)
    before = {k: v.clone() for k, v in lean.module["default_policy"].state_dict().items()}
    batch = _as_tensors(_batch("DQN", 0, 128))
    for step in range(2):  # the target syncs from the second update's timesteps
        lean.update(batch=batch.copy(), timesteps={NUM_ENV_STEPS_SAMPLED_LIFETIME: 100 + step})
    after = lean.module["default_policy"].state_dict()
    for prefix in ("encoder.", "af.", "vf.", "_target_encoder.", "_target_af."):
        moved = [k for k in after if k.startswith(prefix) and not torch.equal(after[k], before[k])]
        assert moved, prefix


def test_only_the_observations_pass_carries_a_graph():
    lean = _learner(None)
    module = _lean_dqn.lean_dqn_module(lean, "default_policy")
    assert module is not None
    batch = _as_tensors(_batch("DQN", 3)).policy_batches["default_policy"]
    out = _lean_dqn.dqn_forward_train(module, batch)
    assert out[QF_PREDS].requires_grad
    assert not out[QF_NEXT_PREDS].requires_grad
    assert not out[QF_TARGET_NEXT_PREDS].requires_grad
    rllibs = module.forward_train(batch)
    assert rllibs.keys() == out.keys()
    for key, value in rllibs.items():
        assert torch.equal(value, out[key]), key


@pytest.mark.parametrize(
    "training",
    [{"double_q": False}, {"num_atoms": 5, "v_min": -10.0, "v_max": 10.0}],
    ids=["single-q", "distributional"],
)
def test_a_module_it_does_not_cover_runs_rllibs_forward(monkeypatch, training):
    calls = _counting(monkeypatch)
    own, lean = _learner(MetricsOnlyLearner, **training), _learner(None, **training)
    assert _lean_dqn.lean_dqn_module(lean, "default_policy") is None
    lean.module.set_state(own.module.get_state())
    _updated_alike(own, lean, steps=2)
    assert calls == []


@pytest.mark.parametrize("change", ["compiled", "several learners", "own module", "states"])
def test_what_the_lean_forward_does_not_cover_is_left_to_rllib(monkeypatch, change):
    lean = _learner(None)
    batch = _as_tensors(_batch("DQN", 0)).policy_batches
    if change == "compiled":
        monkeypatch.setattr(lean.config, "torch_compile_learner", True, raising=False)
    elif change == "several learners":
        monkeypatch.setattr(lean.config, "num_learners", 2, raising=False)
    elif change == "own module":
        module = lean.module["default_policy"]
        monkeypatch.setattr(module, "__class__", type("OwnDQNModule", (type(module),), {}))
    else:
        batch["default_policy"][Columns.STATE_IN] = torch.zeros(32, 1)
    if change != "states":
        assert _lean_dqn.lean_dqn_module(lean, "default_policy") is None
    assert lean.tuner_lean_update(batch) is None


@pytest.mark.parametrize("name", sorted(_lean_dqn.RLLIB_SOURCES))
def test_the_lean_dqn_forward_follows_the_installed_rllib(name):
    """A Ray whose DQN forward pass changed fails here until tuner/rllib/_lean_dqn.py is
    checked against it again."""
    owner, method = name.split(".")
    module = importlib.import_module(_lean_dqn.RLLIB_MODULES[owner])
    source = inspect.getsource(getattr(getattr(module, owner), method))
    digest = hashlib.sha256(source.encode()).hexdigest()
    assert digest == _lean_dqn.RLLIB_SOURCES[name], f"{name} changed: check the lean DQN forward"
