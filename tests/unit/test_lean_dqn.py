"""The lean DQN loss (tuner/rllib/_lean_dqn.py) is RLlib's: the same loss, the same
gradients and the same logged stats on a fixed batch; a distributional head or a masked
batch runs RLlib's own loss; the recorder's stat rows report what log_dict would."""

from __future__ import annotations

import math

import pytest
import torch
from ray.rllib.algorithms.dqn.torch.dqn_torch_learner import DQNTorchLearner
from ray.rllib.core.columns import Columns
from ray.rllib.utils.metrics.metrics_logger import MetricsLogger

from tests.unit.test_lean_metrics import _as_tensors, _batch, _config
from tuner.rllib._lean_dqn import STAT_NAMES, dqn_td_loss, lean_dqn_loss_covers
from tuner.rllib._metrics_recorder import MetricsRecorder


def _dqn_learner(monkeypatch, lean: bool, **training):
    import gymnasium as gym

    monkeypatch.setenv("TUNER_LEAN_LOSS", "1" if lean else "0")
    config = _config("DQN").learners(num_learners=0).training(**training)
    config = config.rl_module(model_config={"fcnet_hiddens": [16]})
    torch.manual_seed(0)
    return config.build_learner(env=gym.make("CartPole-v1"))


def _loss_and_grads(learner, batch, compute):
    module = learner.module["default_policy"]
    module_batch = batch.policy_batches["default_policy"]
    fwd_out = module.forward_train(module_batch)
    config = learner.config.get_config_for_module("default_policy")
    loss = compute(config, module_batch, fwd_out)
    module.zero_grad(set_to_none=True)
    loss.backward()
    grads = {n: p.grad.clone() for n, p in module.named_parameters() if p.grad is not None}
    return loss.detach(), grads


@pytest.mark.parametrize("double_q", [True, False], ids=["double-q", "single-q"])
@pytest.mark.parametrize("loss_fn", ["huber", "mse"])
def test_the_lean_loss_and_gradients_are_rllibs_on_a_fixed_batch(monkeypatch, double_q, loss_fn):
    learner = _dqn_learner(monkeypatch, False, double_q=double_q, td_error_loss_fn=loss_fn)
    batch = _as_tensors(_batch("DQN", 3))

    def rllibs(config, module_batch, fwd_out):
        return DQNTorchLearner.compute_loss_for_module(
            learner, module_id="default_policy", config=config, batch=module_batch, fwd_out=fwd_out
        )

    own_loss, own_grads = _loss_and_grads(learner, batch, rllibs)
    lean_loss, lean_grads = _loss_and_grads(
        learner, batch, lambda config, b, out: dqn_td_loss(config, b, out)[0]
    )
    assert own_loss.item() > 0
    assert torch.equal(lean_loss, own_loss)
    assert own_grads.keys() == lean_grads.keys()
    assert own_grads  # the online net's, not the target's
    for name, grad in own_grads.items():
        assert torch.equal(lean_grads[name], grad), name


def test_a_single_q_target_with_nan_inf_and_ties_is_rllibs(monkeypatch):
    from ray.rllib.algorithms.dqn.dqn_learner import QF_PREDS, QF_TARGET_NEXT_PREDS

    learner = _dqn_learner(monkeypatch, False, double_q=False)
    config = learner.config.get_config_for_module("default_policy")
    nan, inf = float("nan"), float("inf")
    q = torch.tensor([[0.5, 1.0], [0.2, -0.3], [1.5, 0.0], [0.1, 0.4]], requires_grad=True)
    fwd_out = {
        QF_PREDS: q,
        # a NaN next to a number, all -inf, a tie, +inf (its row terminated)
        QF_TARGET_NEXT_PREDS: torch.tensor([[nan, 1.0], [-inf, -inf], [2.0, 2.0], [inf, 0.0]]),
    }
    batch = {
        Columns.ACTIONS: torch.tensor([0, 1, 1, 0]),
        Columns.REWARDS: torch.tensor([1.0, 0.5, -1.0, 2.0]),
        Columns.TERMINATEDS: torch.tensor([False, False, False, True]),
        "n_step": torch.ones(4, dtype=torch.int64),
        "weights": torch.ones(4),
    }
    for rows in (slice(None), slice(0, 1)):  # the batch, and a batch of one
        out = {k: v[rows] for k, v in fwd_out.items()}
        part = {k: v[rows] for k, v in batch.items()}
        own = DQNTorchLearner.compute_loss_for_module(
            learner, module_id="default_policy", config=config, batch=part, fwd_out=out
        )
        (own_grad,) = torch.autograd.grad(own, q)
        lean, _, td_error = dqn_td_loss(config, part, out)
        (lean_grad,) = torch.autograd.grad(lean, q)
        assert math.isfinite(own.item())
        assert torch.equal(lean, own)
        assert torch.equal(lean_grad, own_grad)
        assert not td_error.requires_grad  # logged only: no graph


def test_the_lean_learner_takes_the_lean_loss_and_logs_rllibs_stats(monkeypatch):
    from tuner.rllib import _lean_dqn

    taken = []
    real = _lean_dqn.dqn_td_loss
    monkeypatch.setattr(_lean_dqn, "dqn_td_loss", lambda *a: taken.append(1) or real(*a))
    own, lean = _dqn_learner(monkeypatch, False), _dqn_learner(monkeypatch, True)
    lean.module.set_state(own.module.get_state())
    batch = _as_tensors(_batch("DQN", 1))
    results = [learner.update(batch=batch, timesteps={}) for learner in (own, lean)]
    assert taken == [1]
    stats = [{name: r["default_policy"][name].peek() for name in STAT_NAMES} for r in results]
    assert stats[0]["qf_loss"] > 0
    assert stats[1] == stats[0]


def test_a_distributional_head_or_a_masked_batch_runs_rllibs_loss(monkeypatch):
    calls = []
    real = DQNTorchLearner.compute_loss_for_module

    def counted(self, **kwargs):
        calls.append(1)
        return real(self, **kwargs)

    monkeypatch.setattr(DQNTorchLearner, "compute_loss_for_module", counted)
    learner = _dqn_learner(monkeypatch, True, num_atoms=5, v_min=-10.0, v_max=10.0)
    assert type(learner).__name__ == "LeanDQNTorchLearner"
    learner.update(batch=_as_tensors(_batch("DQN", 2)), timesteps={})
    assert calls == [1]
    config = learner.config.get_config_for_module("default_policy")
    assert not lean_dqn_loss_covers(config, {})
    plain = _dqn_learner(monkeypatch, True).config.get_config_for_module("default_policy")
    assert lean_dqn_loss_covers(plain, {})
    assert not lean_dqn_loss_covers(plain, {Columns.LOSS_MASK: torch.ones(2)})


ROWS = [[1.0, 2.0, -1.0], [float("nan"), 4.0, -3.0], [3.0, float("nan"), -5.0]]


def _logged(rows, use_rows: bool, drop=frozenset()) -> dict:
    real = MetricsLogger()
    recorder = MetricsRecorder(real)
    recorder.drop = drop
    names = ("a", "b", "c")
    for row in rows:
        if use_rows:
            recorder.log_row("p", names, torch.tensor(row, dtype=torch.float32))
        else:
            values = {
                n: torch.tensor(v, dtype=torch.float32) for n, v in zip(names, row, strict=True)
            }
            recorder.log_dict(values, key="p", window=1)
    logged = recorder.flush()
    return {"logged": logged, **{n: real.peek(("p", n)) for n in names if n not in drop}}


def test_stat_rows_report_what_log_dict_reports_nan_skipped():
    own, rows = _logged(ROWS, False), _logged(ROWS, True)
    assert rows == own
    assert rows["a"] == 2.0  # the NaN row skipped
    assert rows["c"] == -3.0
    assert rows["logged"] == 3
    all_nan = _logged([[float("nan")] * 3], True)
    assert math.isnan(all_nan["a"])


def test_a_dropped_stat_of_a_row_is_not_logged():
    rows = _logged(ROWS, True, drop=frozenset({"b"}))
    assert rows["logged"] == 2
    assert "b" not in rows


def test_a_row_flushed_starts_afresh():
    real = MetricsLogger()
    recorder = MetricsRecorder(real)
    recorder.log_row("p", ("a",), torch.tensor([5.0]))
    recorder.flush()
    recorder.log_row("p", ("a",), torch.tensor([1.0]))
    assert recorder.flush() == 1
    assert real.peek(("p", "a")) == 1.0


def test_zero_grad_sets_every_gradient_to_none_as_torchs_does():
    from tuner.ray_internals._learner import zero_grads_to_none

    net = torch.nn.Linear(3, 2)
    optimizer = torch.optim.Adam(net.parameters())
    net(torch.ones(1, 3)).sum().backward()
    assert all(p.grad is not None for p in net.parameters())
    zero_grads_to_none(optimizer)
    assert all(p.grad is None for p in net.parameters())
    net(torch.ones(1, 3)).sum().backward()
    zero_grads_to_none(optimizer, set_to_none=False)  # torch's own: zeros kept
    assert all(torch.equal(p.grad, torch.zeros_like(p)) for p in net.parameters())
