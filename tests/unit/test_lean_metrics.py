"""The deferred loss metrics of the lean DQN/SAC Learners (tuner/rllib/_lean_metrics.py):
a window=1 stat keeps only its last value until the flush, every other log call is kept
in full and in order, and what reaches RLlib's MetricsLogger reduces to the same results
as logging every call; a spec's own learner_class, or TUNER_LEAN_LOSS=0, keeps its own."""

from __future__ import annotations

import math

import pytest
import torch
from ray.rllib.algorithms.dqn.torch.dqn_torch_learner import DQNTorchLearner
from ray.rllib.algorithms.sac.torch.sac_torch_learner import SACTorchLearner
from ray.rllib.utils.metrics.metrics_logger import MetricsLogger

from tests.lean_compare import assert_reported_alike
from tuner.rllib import build_config
from tuner.rllib._lean_metrics import MetricsRecorder
from tuner.spec import parse_spec


def log_like_an_update(metrics, step: int) -> None:
    """What RLlib's DQN Learner logs per update: the TD errors as an item series, a dict
    of window=1 stats, and step counters (a sum and a lifetime sum)."""
    metrics.log_value(
        ("p", "td_error"), torch.arange(4, dtype=torch.float32) + step, reduce="item_series"
    )
    metrics.log_dict(
        {"qf_loss": torch.tensor(float(step) / 3), "nested": {"qf_max": float(step * 2)}},
        key="p",
        window=1,
    )
    metrics.log_value(("p", "trained"), 32, reduce="sum")
    metrics.log_value(("p", "trained_lifetime"), 32, reduce="lifetime_sum", with_throughput=True)


def _peeks(results) -> dict:
    flat = {}
    for key, value in results.items():
        if isinstance(value, dict):
            flat.update({(key, *k): v for k, v in _peeks(value).items()})
        else:
            flat[(key,)] = value.peek() if hasattr(value, "peek") else value
    return flat


def test_one_flush_reports_what_a_reduce_after_every_update_reports():
    """RLlib's own step reduces the Learner's metrics after every update and the
    algorithm's metrics aggregate the results; recorded and flushed once, the Learner's
    one reduce gives the algorithm the same figures: each window=1 stat's mean, each
    counter's sum, every TD error."""
    own_learner, own_algo = MetricsLogger(), MetricsLogger()
    for step in range(5):
        log_like_an_update(own_learner, step)
        own_algo.aggregate([own_learner.reduce()], key="learners")
    lean_learner, lean_algo = MetricsLogger(), MetricsLogger()
    recorder = MetricsRecorder(lean_learner)
    for step in range(5):
        log_like_an_update(recorder, step)
    # 5 item-series calls, then one mean per window=1 stat and one sum per counter
    assert recorder.flush() == 5 + 2 + 2
    assert recorder.flush() == 0
    lean_algo.aggregate([lean_learner.reduce()], key="learners")
    own, lean = _peeks(own_algo.compile()), _peeks(lean_algo.compile())
    assert own.keys() == lean.keys()
    path = ("learners", "p")
    assert lean[(*path, "qf_loss")] == pytest.approx(own[(*path, "qf_loss")], rel=1e-7)
    assert lean[(*path, "qf_loss")] == pytest.approx(2 / 3, rel=1e-7)
    assert lean[(*path, "nested", "qf_max")] == own[(*path, "nested", "qf_max")] == 4.0
    assert lean[(*path, "trained")] == own[(*path, "trained")] == 160
    assert lean[(*path, "trained_lifetime")] == own[(*path, "trained_lifetime")] == 160
    series = [float(x) for t in lean[(*path, "td_error")] for x in torch.as_tensor(t).ravel()]
    assert series == [
        float(x) for t in own[(*path, "td_error")] for x in torch.as_tensor(t).ravel()
    ]
    assert len(series) == 20


@pytest.mark.parametrize(
    ("values", "reported"),
    [([1.0, float("nan"), 3.0], 2.0), ([float("nan"), float("nan")], None)],
    ids=["one-nan", "all-nan"],
)
@pytest.mark.parametrize("as_tensor", [False, True], ids=["float", "tensor"])
def test_a_nan_update_is_skipped_as_rllib_skips_it(values, reported, as_tensor):
    """RLlib's mean and sum stats skip NaN (nanmean, nansum): one bad update does not
    make the iteration's figure NaN, unless every update's was."""
    own_learner, own_algo = MetricsLogger(), MetricsLogger()
    lean_learner, lean_algo = MetricsLogger(), MetricsLogger()
    recorder = MetricsRecorder(lean_learner)
    for value in values:
        logged = torch.tensor(value) if as_tensor else value
        own_learner.log_value("qf_loss", logged, window=1)
        own_algo.aggregate([own_learner.reduce()], key="learners")
        recorder.log_value("qf_loss", logged, window=1)
        recorder.log_value("steps", logged, reduce="sum")
    recorder.flush()
    lean_algo.aggregate([lean_learner.reduce()], key="learners")
    own = float(own_algo.peek(("learners", "qf_loss")))
    lean = float(lean_algo.peek(("learners", "qf_loss")))
    steps = float(lean_algo.peek(("learners", "steps")))
    if reported is None:
        assert math.isnan(own)
        assert math.isnan(lean)
        assert steps == 0.0
    else:
        assert own == lean == reported
        assert steps == 4.0


def test_a_dropped_stat_is_neither_kept_nor_logged():
    real = MetricsLogger()
    recorder = MetricsRecorder(real)
    recorder.drop = frozenset({"td_error"})
    recorder.log_value(("p", "td_error"), torch.ones(4), reduce="item_series")
    recorder.log_value(("p", "qf_loss"), 1.0, window=1)
    assert recorder.flush() == 1
    assert real.peek(("p", "qf_loss")) == 1.0
    with pytest.raises(KeyError):
        real.peek(("p", "td_error"))


@pytest.mark.parametrize(
    "kwargs",
    [{"window": 10}, {"reduce": "max", "window": 1}, {}, {"ema_coeff": 0.1}],
    ids=["window-10-mean", "window-1-max", "ema", "ema-coeff"],
)
def test_a_stat_reported_otherwise_once_a_reduce_is_named(kwargs):
    """A windowed or EMA stat, reduced once after several updates, keeps or weighs other
    values than a reduce after each: kept, logged, and named (none on RLlib 2.60's DQN
    or SAC update path)."""
    recorder = MetricsRecorder(MetricsLogger())
    for value in (5.0, 1.0):
        recorder.log_value(("p", "odd"), value, **kwargs)
    recorder.log_value(("p", "qf_loss"), 1.0, window=1)
    recorder.log_value(("p", "trained"), 32, reduce="sum")
    recorder.log_value(("p", "last_update"), 7, reduce="max")
    assert recorder.unlike == {("p", "odd")}
    assert recorder.flush() == 2 + 3


def test_a_kept_tensor_is_the_value_at_log_time():
    """A parameter changed in place before the flush (an optimizer step) is reported
    as it was when the loss logged it."""
    real = MetricsLogger()
    recorder = MetricsRecorder(real)
    param = torch.nn.Parameter(torch.tensor(1.5))
    recorder.log_value("alpha", param, window=1)
    with torch.no_grad():
        param.add_(10.0)
    recorder.flush()
    assert float(real.peek("alpha")) == 1.5


def test_everything_but_logging_goes_to_the_real_logger():
    real = MetricsLogger()
    real.log_value("seen", 7.0, window=1)
    recorder = MetricsRecorder(real)
    assert recorder.peek("seen") == 7.0
    recorder.log_value("later", 1.0, window=1)
    with pytest.raises(KeyError):
        real.peek("later")  # kept, not logged, until the flush
    recorder.flush()
    assert real.peek("later") == 1.0


def _config(algorithm: str):
    env = "Pendulum-v1" if algorithm == "SAC" else "CartPole-v1"
    return build_config(parse_spec({"name": "lean", "algorithm": algorithm, "env": env}))


@pytest.mark.parametrize(
    ("algorithm", "rllibs"), [("DQN", DQNTorchLearner), ("SAC", SACTorchLearner)]
)
def test_the_lean_learner_is_the_default_and_a_specs_own_or_the_switch_keep_theirs(
    monkeypatch, algorithm, rllibs
):
    config = _config(algorithm)
    assert issubclass(config.learner_class, rllibs)
    assert config.learner_class.__name__ == f"Lean{rllibs.__name__}"
    own = config.copy(copy_frozen=False).training(learner_class=rllibs)
    assert own.learner_class is rllibs
    monkeypatch.setenv("TUNER_LEAN_LOSS", "0")
    assert config.learner_class is rllibs


def _batch(algorithm: str, step: int, n: int = 32):
    import numpy as np
    from ray.rllib.core.columns import Columns
    from ray.rllib.policy.sample_batch import MultiAgentBatch, SampleBatch

    rng = np.random.default_rng(step)
    dims = 3 if algorithm == "SAC" else 4
    actions = (
        rng.uniform(-2, 2, size=(n, 1)).astype(np.float32)
        if algorithm == "SAC"
        else rng.integers(0, 2, size=n)
    )
    columns = {
        Columns.OBS: rng.normal(size=(n, dims)).astype(np.float32),
        Columns.NEXT_OBS: rng.normal(size=(n, dims)).astype(np.float32),
        Columns.ACTIONS: actions,
        Columns.REWARDS: rng.normal(size=n).astype(np.float32),
        Columns.TERMINATEDS: rng.random(n) < 0.1,
        Columns.TRUNCATEDS: np.zeros(n, dtype=bool),
        "n_step": np.ones(n, dtype=np.int64),
        "weights": np.ones(n, dtype=np.float32),
    }
    return MultiAgentBatch({"default_policy": SampleBatch(columns)}, env_steps=n)


def _learner(algorithm: str, lean: bool, monkeypatch):
    import gymnasium as gym

    monkeypatch.setenv("TUNER_LEAN_LOSS", "1" if lean else "0")
    config = _config(algorithm).learners(num_learners=0)
    config = config.rl_module(model_config={"fcnet_hiddens": [16]})
    env = gym.make("Pendulum-v1" if algorithm == "SAC" else "CartPole-v1")
    torch.manual_seed(0)
    return config.build_learner(env=env)


def _as_tensors(batch):
    """The batch with its columns as torch tensors, as the flat path hands them."""
    from ray.rllib.policy.sample_batch import MultiAgentBatch, SampleBatch

    return MultiAgentBatch(
        {
            mid: SampleBatch({k: torch.as_tensor(v) for k, v in b.items()})
            for mid, b in batch.policy_batches.items()
        },
        env_steps=batch.env_steps(),
    )


def _reported(results) -> dict:
    """Every reported leaf but the TD errors and the wall-clock ones."""
    out = {}
    for mid, stats in results.items():
        for key, stat in stats.items():
            if key != "td_error" and "throughput" not in key and "timer" not in key:
                out[(mid, key)] = stat.peek()
    return out


@pytest.mark.parametrize("as_tensors", [False, True], ids=["numpy", "tensors"])
@pytest.mark.parametrize("algorithm", ["DQN", "SAC"])
def test_update_by_update_the_lean_learner_is_rllibs(monkeypatch, algorithm, as_tensors):
    """RLlib's own training step reduces after every update: on the same fixed batches
    the lean Learner makes the same updates and reports the same values each time. A
    batch of tensors takes its one-batch update (ray_internals.single_batch_update), a
    numpy batch RLlib's own update."""
    from ray.rllib.utils.metrics import NUM_ENV_STEPS_SAMPLED_LIFETIME

    from tuner.rllib import _lean_metrics

    one_batch = []
    real = _lean_metrics.single_batch_update
    monkeypatch.setattr(
        _lean_metrics, "single_batch_update", lambda *a: one_batch.append(1) or real(*a)
    )
    own, lean = _learner(algorithm, False, monkeypatch), _learner(algorithm, True, monkeypatch)
    assert type(lean).__name__ == f"Lean{type(own).__name__}"
    lean.module.set_state(own.module.get_state())
    for step in range(4):
        timesteps = {NUM_ENV_STEPS_SAMPLED_LIFETIME: 100 * (step + 1)}
        results = []
        for learner in (own, lean):
            torch.manual_seed(step)  # SAC samples its actions in the loss
            batch = _batch(algorithm, step)
            batch = _as_tensors(batch) if as_tensors else batch
            results.append(learner.update(batch=batch, timesteps=timesteps))
        reported = [_reported(r) for r in results]
        assert ("default_policy", "qf_loss") in reported[0]
        assert ("__all_modules__", "num_env_steps_trained_lifetime") in reported[0]
        assert_reported_alike(reported[0], reported[1])
    assert len(one_batch) == (4 if as_tensors else 0)
    own_state = own.module["default_policy"].state_dict()
    lean_state = lean.module["default_policy"].state_dict()
    assert own_state.keys() == lean_state.keys()
    for key in own_state:
        assert torch.equal(own_state[key], lean_state[key]), key
