"""`normalize_observations: true`: RLlib's MeanStdFilter connector in the trial, its
statistics kept with the checkpoint, and `tuner evaluate` feeding the policy the
observations normalized as the trial's policy saw them."""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import tiny_spec
from tuner.rllib import _evaluate
from tuner.rllib._observations import filter_from_checkpoint, filter_state
from tuner.sweep import run_sweep

pytestmark = pytest.mark.integration


def test_a_normalized_trial_keeps_its_statistics_and_evaluate_uses_them(
    ray_local, tmp_path, monkeypatch
):
    spec = tiny_spec(
        name="normalized",
        normalize_observations=True,
        stop={"training_iteration": 2},
        checkpoint={"at_end": True},
    )
    summary = run_sweep(spec, storage_path=tmp_path / "tune", progress=False)
    assert summary.status == "SUCCEEDED", summary
    checkpoint = summary.best.checkpoint
    (kept,) = filter_state(checkpoint).values()
    (stats,) = kept["running_stats"]
    # every env step of both iterations went through the filter (128 a batch)
    assert stats["num_pushes"] >= 2 * spec.config["train_batch_size_per_learner"]
    normalize = filter_from_checkpoint(checkpoint)

    seen: list[np.ndarray] = []
    act = _evaluate._act
    monkeypatch.setattr(
        _evaluate, "_act", lambda module, obs: seen.append(np.array(obs)) or act(module, obs)
    )
    result = _evaluate.evaluate_checkpoint(checkpoint, episodes=1, seed=3)
    assert result.returns
    assert len(seen) == result.lengths[0]

    import gymnasium as gym

    raw, _ = gym.make("CartPole-v1").reset(seed=3)
    # the policy saw the first observation normalized, not raw (row 0 of its batch)
    np.testing.assert_allclose(seen[0][0], normalize(None, raw), rtol=1e-6)
    assert not np.allclose(seen[0][0], raw)


def test_a_plain_checkpoint_has_no_statistics(ray_local, tmp_path):
    summary = run_sweep(
        tiny_spec(name="plain", checkpoint={"at_end": True}),
        storage_path=tmp_path / "tune",
        progress=False,
    )
    assert filter_state(summary.best.checkpoint) is None
    assert filter_from_checkpoint(summary.best.checkpoint) is None


def test_evaluate_plays_at_most_ten_episodes_side_by_side(ray_local, tmp_path, monkeypatch):
    """12 episodes: a group of ten, then two, each forward pass one row per episode of
    its group; the first ten play as an evaluation of ten plays them."""
    summary = run_sweep(
        tiny_spec(name="grouped", checkpoint={"at_end": True}),
        storage_path=tmp_path / "tune",
        progress=False,
    )
    checkpoint = summary.best.checkpoint
    ten = _evaluate.evaluate_checkpoint(checkpoint, episodes=10, seed=5)
    sizes: list[int] = []
    act = _evaluate._act
    monkeypatch.setattr(
        _evaluate, "_act", lambda module, obs: sizes.append(len(obs)) or act(module, obs)
    )
    twelve = _evaluate.evaluate_checkpoint(checkpoint, episodes=12, seed=5)
    assert sorted(set(sizes)) == [2, 10]
    assert sizes == sorted(sizes, reverse=True)  # the ten first, then the two
    assert twelve.returns[:10] == ten.returns
    assert len(twelve.returns) == 12
