"""The flat replay buffer of DQN / SAC trials (tuner/rllib/_fast_replay.py): what it
stores from RLlib's episode chunks, its ring, and what it samples."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium.spaces import Box, Discrete
from ray.rllib.algorithms.dqn import DQNConfig
from ray.rllib.env.single_agent_episode import SingleAgentEpisode

from tuner.rllib._fast_replay import TransitionBuffer, UpdateDebt, debt_for

OBS = Box(-1e6, 1e6, (2,), np.float32)


def chunk(
    start: int,
    length: int,
    *,
    terminated: bool = False,
    truncated: bool = False,
    id_: str | None = None,
):
    """An episode chunk whose observation at step t is [t, -t], action t % 2, reward t."""
    steps = range(start, start + length)
    return SingleAgentEpisode(
        id_=id_,
        observations=[np.array([t, -t], np.float32) for t in range(start, start + length + 1)],
        actions=[t % 2 for t in steps],
        rewards=[float(t) for t in steps],
        terminated=terminated,
        truncated=truncated,
        observation_space=OBS,
        action_space=Discrete(2),
        len_lookback_buffer=0,
    )


def test_chunks_become_one_step_transitions_with_the_next_observation():
    buffer = TransitionBuffer(100, seed=0)
    # an ongoing episode sampled in two rounds; the second chunk ends it
    assert buffer.add([chunk(0, 3), chunk(3, 2, terminated=True)]) == 5
    assert len(buffer) == 5
    assert buffer.added == 5
    rows = buffer._cols
    np.testing.assert_array_equal(rows["obs"][:5, 0], [0, 1, 2, 3, 4])
    np.testing.assert_array_equal(rows["new_obs"][:5, 0], [1, 2, 3, 4, 5])
    np.testing.assert_array_equal(rows["rewards"][:5], [0, 1, 2, 3, 4])
    np.testing.assert_array_equal(rows["actions"][:5], [0, 1, 0, 1, 0])
    # only the episode's last step ends it: a chunk boundary is not a terminal
    np.testing.assert_array_equal(rows["terminateds"][:5], [0, 0, 0, 0, 1])
    assert not rows["truncateds"][:5].any()


def test_a_truncated_episode_bootstraps():
    buffer = TransitionBuffer(10)
    buffer.add([chunk(0, 2, truncated=True)])
    assert buffer._cols["truncateds"][:2].tolist() == [False, True]
    assert not buffer._cols["terminateds"][:2].any()


def test_the_ring_keeps_the_newest_capacity_transitions():
    buffer = TransitionBuffer(5)
    buffer.add([chunk(0, 3)])
    buffer.add([chunk(3, 5)])
    assert len(buffer) == 5
    assert buffer.added == 8
    assert sorted(buffer._cols["rewards"].tolist()) == [3, 4, 5, 6, 7]
    buffer.add([chunk(100, 12)])  # more than the capacity in one chunk
    assert sorted(buffer._cols["rewards"].tolist()) == [107, 108, 109, 110, 111]


def test_growing_keeps_what_was_stored():
    buffer = TransitionBuffer(20_000)
    buffer.add([chunk(0, 4000)])
    assert len(buffer._cols["rewards"]) == 4096
    buffer.add([chunk(4000, 3000)])
    assert len(buffer._cols["rewards"]) == 8192
    np.testing.assert_array_equal(buffer._cols["rewards"][:7000], np.arange(7000))
    np.testing.assert_array_equal(buffer._cols["obs"][:7000, 1], -np.arange(7000))


def test_samples_uniformly_with_rllibs_n_step_and_weight_columns():
    buffer = TransitionBuffer(100, seed=1)
    buffer.add([chunk(0, 10, terminated=True)])
    batch = buffer.sample(4000)
    assert set(batch) == {
        "obs",
        "new_obs",
        "actions",
        "rewards",
        "terminateds",
        "truncateds",
        "n_step",
        "weights",
    }
    assert batch["obs"].shape == (4000, 2)
    assert batch["obs"].dtype == np.float32
    assert (batch["n_step"] == 1).all()
    assert (batch["weights"] == 1.0).all()
    # rows stay whole: each transition's next observation is its own
    np.testing.assert_array_equal(batch["new_obs"][:, 0], batch["obs"][:, 0] + 1)
    np.testing.assert_array_equal(batch["terminateds"], batch["rewards"] == 9)
    counts = np.bincount(batch["rewards"].astype(int), minlength=10)
    assert counts.min() > 300  # each of the 10 transitions about 400 times
    # the trial's seed makes it repeatable
    again = TransitionBuffer(100, seed=1)
    again.add([chunk(0, 10, terminated=True)])
    np.testing.assert_array_equal(again.sample(4000)["rewards"], batch["rewards"])


def test_a_uniform_one_step_sample_is_the_n_step_walks_own(monkeypatch):
    """The 1-step shortcut draws the same rows and returns the same columns, dtypes
    included, as the n-step walk (an ongoing, a truncated and a terminated episode)."""
    from tuner.rllib import _transitions

    def walked(*args, **kwargs):
        raise AssertionError("the 1-step shortcut walked the n steps")

    samples = {}
    for shortcut in (True, False):
        monkeypatch.setattr(_transitions, "ONE_STEP_SAMPLES", shortcut)
        buffer = TransitionBuffer(100, seed=5)
        if shortcut:  # the shortcut taken: the walk is never called
            monkeypatch.setattr(buffer, "_follow", walked)
            monkeypatch.setattr(buffer, "_returns", walked)
        buffer.add([chunk(0, 7, terminated=True), chunk(20, 5, truncated=True), chunk(40, 9)])
        samples[shortcut] = buffer.sample(500, n_step=1, gamma=0.9)
    assert set(samples[True]) == set(samples[False])
    for name, column in samples[False].items():
        assert samples[True][name].dtype == column.dtype, name
        np.testing.assert_array_equal(samples[True][name], column, err_msg=name)


def test_continuous_actions_keep_their_shape():
    episode = SingleAgentEpisode(
        observations=[np.zeros(3, np.float32)] * 3,
        actions=[np.array([0.5], np.float32), np.array([-0.5], np.float32)],
        rewards=[1.0, 2.0],
        observation_space=Box(-1, 1, (3,), np.float32),
        action_space=Box(-2, 2, (1,), np.float32),
        len_lookback_buffer=0,
    )
    buffer = TransitionBuffer(10)
    buffer.add([episode])
    assert buffer.sample(5)["actions"].shape == (5, 1)


def test_empty_and_bad_capacity_are_refused():
    with pytest.raises(ValueError, match="capacity"):
        TransitionBuffer(0)
    with pytest.raises(ValueError, match="empty"):
        TransitionBuffer(5).sample(1)


def test_prioritized_draws_by_priority_to_the_alpha_and_weights_as_rllib():
    buffer = TransitionBuffer(100, seed=2, alpha=1.0)
    buffer.add([chunk(0, 2)])
    assert buffer.sample(2, beta=0.4)["weights"].tolist() == [1.0, 1.0]  # both new: max priority
    buffer._last_rows = np.array([0, 1])
    buffer.update_priorities(np.array([-1.0, 3.0]))  # |TD error|
    batch = buffer.sample(20_000, beta=0.5)
    share = (batch["rewards"] == 1).mean()
    assert share == pytest.approx(0.75, abs=0.02)  # 3 / (1 + 3)
    # (N P)^-beta over (N min P)^-beta: 1 for the least likely, (0.5 / 1.5)^0.5 for the other
    weights = dict(zip(batch["rewards"].tolist(), batch["weights"].tolist(), strict=False))
    assert weights[0.0] == pytest.approx(1.0)
    assert weights[1.0] == pytest.approx((0.5 / 1.5) ** 0.5, rel=1e-5)
    # a new transition gets the largest priority seen (3): share 3 / (1 + 3 + 3)
    buffer.add([chunk(2, 1)])
    assert (buffer.sample(20_000)["rewards"] == 2).mean() == pytest.approx(3 / 7, abs=0.02)


def test_priorities_follow_the_alpha_and_the_last_sample():
    flat = TransitionBuffer(100, seed=3, alpha=0.0)  # alpha 0: uniform
    flat.add([chunk(0, 4)])
    flat.sample(4)
    flat.update_priorities(np.array([100.0, 0.0, 0.0, 0.0]))
    with pytest.raises(ValueError, match="3 TD errors for a sample of 0"):
        flat.update_priorities(np.zeros(3))  # the last sample's priorities were set
    counts = np.bincount(flat.sample(8000)["rewards"].astype(int), minlength=4)
    assert counts.min() > 1700


def test_uniform_ignores_priorities():
    buffer = TransitionBuffer(10)
    buffer.add([chunk(0, 3)])
    buffer.sample(3)
    buffer.update_priorities(np.array([5.0, 0.0, 0.0]))
    assert buffer.sample(3, beta=1.0)["weights"].tolist() == [1.0, 1.0, 1.0]


def by_start(batch: dict) -> dict[float, dict]:
    """Each sampled start observation's row (rows with one start are identical)."""
    return {
        float(obs[0]): {k: v[i] for k, v in batch.items()} for i, obs in enumerate(batch["obs"])
    }


def test_n_step_sums_discounted_rewards_across_an_episodes_chunks():
    buffer = TransitionBuffer(100, seed=4)
    buffer.add([chunk(0, 3, id_="a"), chunk(50, 2, id_="b")])  # another episode in between
    buffer.add([chunk(3, 2, terminated=True, id_="a")])  # "a" goes on and ends
    rows = by_start(buffer.sample(3000, n_step=3, gamma=0.5))
    assert rows[0.0]["rewards"] == pytest.approx(0 + 0.5 * 1 + 0.25 * 2)
    assert rows[0.0]["new_obs"][0] == 3
    assert not rows[0.0]["terminateds"]
    # across the chunk boundary, ending on the terminal step
    assert rows[2.0]["rewards"] == pytest.approx(2 + 0.5 * 3 + 0.25 * 4)
    assert rows[2.0]["new_obs"][0] == 5
    assert rows[2.0]["terminateds"]
    # two steps left: the uniform buffer shortens the sum (RLlib's slice), n_step stays 3
    # and, as RLlib's slice does, the shortened sample is not flagged terminated
    assert rows[3.0]["rewards"] == pytest.approx(3 + 0.5 * 4)
    assert rows[3.0]["new_obs"][0] == 5
    assert rows[3.0]["n_step"] == 3
    assert not rows[3.0]["terminateds"]
    assert not rows[3.0]["truncateds"]
    # the other episode's rows never enter "a"'s sums: "b" has not gone on yet
    assert rows[50.0]["rewards"] == pytest.approx(50 + 0.5 * 51)
    assert rows[50.0]["new_obs"][0] == 52
    assert not rows[50.0]["terminateds"]


def test_prioritized_n_step_draws_again_where_fewer_than_n_steps_follow():
    buffer = TransitionBuffer(100, seed=5, alpha=0.6)
    buffer.add([chunk(0, 6, terminated=True, id_="a")])
    batch = buffer.sample(2000, beta=0.4, n_step=3, gamma=0.9)
    assert set(batch["obs"][:, 0].tolist()) == {0.0, 1.0, 2.0, 3.0}  # 4, 5: too near the end
    assert batch["terminateds"][batch["obs"][:, 0] == 3].all()


def test_an_n_step_range_draws_n_per_sample():
    buffer = TransitionBuffer(100, seed=6)
    buffer.add([chunk(0, 20, id_="a")])
    batch = buffer.sample(3000, n_step=(1, 4), gamma=1.0)
    assert set(batch["n_step"].tolist()) == {1, 2, 3}  # [lo, hi), as RLlib draws it
    starts = batch["obs"][:, 0]
    full = starts + batch["n_step"] <= 20
    np.testing.assert_array_equal(batch["new_obs"][full, 0], (starts + batch["n_step"])[full])


def test_a_link_to_an_overwritten_transition_ends_the_sum():
    buffer = TransitionBuffer(4, seed=7)
    buffer.add([chunk(0, 2, id_="a")])
    buffer.add([chunk(100, 3, id_="b")])  # overwrites "a"'s first step
    buffer.add([chunk(2, 1, id_="a")])  # "a" goes on: its row 1 (obs 1) is overwritten now
    rows = by_start(buffer.sample(2000, n_step=2, gamma=1.0))
    assert set(rows) == {100.0, 101.0, 102.0, 2.0}
    assert rows[102.0]["rewards"] == 102
    assert rows[102.0]["new_obs"][0] == 103


def test_updates_follow_the_env_steps_really_sampled():
    debt = UpdateDebt(train_weight=8, steps_per_round=32)  # 8 updates per 32 env steps
    assert debt.owe(32) == 8  # a round that sampled what RLlib plans: RLlib's 8
    # vectorised envs overshoot where an episode resets: 39 steps call for 9.75 updates
    owed = [debt.owe(n) for n in (39, 39, 39, 39)]
    assert owed == [9, 10, 10, 10]
    assert sum(owed) * 32 == 4 * 39 * 8  # exact over rounds, nothing lost or added
    assert debt.owe(0) == 0


def test_fewer_updates_than_rounds_carry_over():
    debt = UpdateDebt(train_weight=1, steps_per_round=3 * 4)  # 1 update per 3 rounds of 4
    assert [debt.owe(4) for _ in range(6)] == [0, 0, 1, 0, 0, 1]
    with pytest.raises(ValueError):
        UpdateDebt(train_weight=0, steps_per_round=4)


@pytest.mark.parametrize(
    "intensity, fragment, envs, runners, per_env_step",
    [(8, 32, 1, 0, 8.0), (8, 4, 8, 0, 8.0), (4, 1, 1, 0, 4.0), (None, 1, 1, 0, 32.0)],
)
def test_the_rate_is_rllibs_round_robin(intensity, fragment, envs, runners, per_env_step):
    config = (
        DQNConfig()
        .training(train_batch_size_per_learner=32, training_intensity=intensity)
        .env_runners(
            rollout_fragment_length=fragment,
            num_envs_per_env_runner=envs,
            num_env_runners=runners,
        )
    )
    debt = debt_for(config)
    assert debt.owe(1000 * fragment * envs) * 32 / (1000 * fragment * envs) == per_env_step
