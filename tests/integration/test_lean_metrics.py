"""The lean DQN/SAC Learners (tuner/rllib/_lean_metrics.py) train the very same weights
and report the very same learner metrics as RLlib's own Learners on the flat replay path
(several updates per reduce, or one with a prioritized buffer)."""

from __future__ import annotations

import math

import pytest
import torch

from tests.replay_trials import replay_trial

pytestmark = pytest.mark.integration

UNIFORM = {"type": "EpisodeReplayBuffer", "capacity": 10_000}
PRIORITIZED = {"type": "PrioritizedEpisodeReplayBuffer", "alpha": 0.6, "beta": 0.4}
TIMED = ("timer", "throughput")  # wall-clock figures, different in any two runs


def _trial(algorithm: str, buffer: dict):
    return replay_trial(
        algorithm,
        {
            "num_steps_sampled_before_learning_starts": 0,
            "min_time_s_per_iteration": 0,
            "replay_buffer_config": buffer,
            "training_intensity": 8,  # 8 updates a round
            "target_network_update_freq": 8 if algorithm == "DQN" else 0,
        },
    )


def _leaves(tree: dict, path: tuple = ()):
    for key, value in tree.items():
        if isinstance(value, dict):
            yield from _leaves(value, (*path, key))
        else:
            yield (*path, key), value


def _run(algorithm: str, buffer: dict) -> tuple[str, str, dict, dict]:
    algo = _trial(algorithm, buffer)
    try:
        results = [algo.train() for _ in range(2)]
        learner = algo.learner_group._learner
        # every stat RLlib 2.60's DQN/SAC update logs is reported as RLlib reports it
        unlike = getattr(learner, "tuner_unlike_stats", None)
        if unlike is not None:
            assert unlike() == set()
        state = learner.module["default_policy"].state_dict()
        weights = {k: v.detach().clone() for k, v in state.items()}
        path = algo._replay_path
        name = type(learner).__name__
    finally:
        algo.stop()
    reported = {
        key: value
        for key, value in _leaves(results[-1]["learners"])
        if not any(word in str(key) for word in TIMED)
    }
    return name, path, weights, reported


@pytest.mark.parametrize("buffer", [UNIFORM, PRIORITIZED], ids=["uniform", "prioritized"])
@pytest.mark.parametrize("algorithm", ["DQN", "SAC"])
def test_the_lean_learner_trains_and_reports_what_rllibs_does(
    ray_local, monkeypatch, algorithm, buffer
):
    """On the flat path, RLlib's Learner reducing after every update as RLlib's own step
    does, against the lean one with the flat path's defaults: a uniform buffer's
    iteration reduced once, a prioritized buffer's after each update. (RLlib's own path
    samples its buffer unseeded, so two of its runs differ anyway:
    tests/unit/test_lean_metrics.py compares the Learners there, update by update.)"""
    from tuner.rllib import _fast_replay, _lean_metrics

    one_batch = []
    real = _lean_metrics.single_batch_update
    monkeypatch.setattr(
        _lean_metrics, "single_batch_update", lambda *a: one_batch.append(1) or real(*a)
    )
    runs = {}
    for lean in ("0", "1"):
        monkeypatch.setenv("TUNER_LEAN_LOSS", lean)
        monkeypatch.setattr(_fast_replay, "REDUCE_EACH_UPDATE", lean == "0")
        runs[lean] = _run(algorithm, buffer)
    (own_name, own_path, own_w, own_m), (lean_name, lean_path, lean_w, lean_m) = (
        runs["0"],
        runs["1"],
    )
    assert own_path == lean_path == "flat"
    assert (own_name, lean_name) == (f"{algorithm}TorchLearner", f"Lean{algorithm}TorchLearner")
    assert own_w.keys() == lean_w.keys()
    assert own_w
    for key in own_w:
        assert torch.equal(own_w[key], lean_w[key]), key
    assert own_m.keys() == lean_m.keys()
    assert ("default_policy", "qf_loss") in own_m
    # the lean Learner's every update took the one-batch path (16 rows an update)
    trained = lean_m[("__all_modules__", "num_module_steps_trained_lifetime")]
    assert len(one_batch) == trained / 16 > 0
    for key, value in own_m.items():
        if isinstance(value, float) and math.isnan(value):
            assert math.isnan(lean_m[key]), key
        elif isinstance(value, float):  # a mean over updates: float64 sums, or RLlib's
            assert lean_m[key] == pytest.approx(value, rel=1e-6), key
        else:
            assert lean_m[key] == value, key


@pytest.mark.parametrize("algorithm", ["DQN", "SAC"])
def test_a_uniform_buffers_iteration_reduces_its_learner_metrics_once(
    ray_local, monkeypatch, algorithm
):
    """The default: every update of an iteration leaves the learner's metrics unreduced
    and the iteration's end reduces them once; a spec with
    min_train_timesteps_per_iteration (RLlib's loop reads them) reduces after each."""
    from tuner.rllib import _fast_replay

    reduces: list[int] = []
    own_reduce = _fast_replay._reduce_learner
    monkeypatch.setattr(
        _fast_replay, "_reduce_learner", lambda learner: reduces.append(1) or own_reduce(learner)
    )
    algo = _trial(algorithm, UNIFORM)
    try:
        results = [algo.train() for _ in range(2)]
    finally:
        algo.stop()
    assert len(reduces) == 2  # one per iteration
    trained = results[-1]["learners"]["__all_modules__"]["num_env_steps_trained_lifetime"]
    assert trained == pytest.approx(8 * results[-1]["num_env_steps_sampled_lifetime"])
    assert _fast_replay.reduce_per_iteration(algo.config)
    counting = algo.config.copy(copy_frozen=False)
    counting.min_train_timesteps_per_iteration = 1
    assert not _fast_replay.reduce_per_iteration(counting)


def test_a_local_learner_takes_each_update_without_the_learner_groups_wrapping(
    ray_local, monkeypatch
):
    """The flat path hands a local Learner its batch directly (ray_internals
    .update_unreduced): LearnerGroup.update is never called, and every update is made and
    reported."""
    from ray.rllib.core.learner.learner_group import LearnerGroup

    calls = []
    own = LearnerGroup.update
    monkeypatch.setattr(LearnerGroup, "update", lambda *a, **k: calls.append(1) or own(*a, **k))
    algo = _trial("DQN", UNIFORM)
    try:
        assert algo.learner_group.is_local
        result = algo.train()
    finally:
        algo.stop()
    assert calls == []
    trained = result["learners"]["__all_modules__"]["num_env_steps_trained_lifetime"]
    assert trained == pytest.approx(8 * result["num_env_steps_sampled_lifetime"])
    assert trained > 0
