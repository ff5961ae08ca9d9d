"""Tune's reuse_actors with the RLlib trainables (reset_config builds the algorithm again
in place): on real Ray and RLlib, one actor runs several trials in turn, and a trial on a
reused actor trains exactly as the same config and seed on a fresh one."""

from __future__ import annotations

import pytest

from tests.conftest import TINY_TRIALS
from tuner.spec import parse_spec
from tuner.sweep import build_tuner

pytestmark = pytest.mark.integration

SPECS = TINY_TRIALS  # DQN: the flat replay path, its buffer must start empty again
LOSS = {"PPO": "total_loss", "DQN": "qf_loss"}
RETURN = "env_runners/episode_return_mean"
STEPS = "env_runners/num_env_steps_sampled_lifetime"


@pytest.mark.parametrize(
    "algorithm, runners",
    [("PPO", 0), ("DQN", 0), ("PPO", 1)],  # 1: an env runner actor, stopped and made again
)
def test_a_reused_actor_trains_its_next_trial_as_a_fresh_one(
    ray_local, tmp_path, algorithm, runners
):
    spec = parse_spec(
        {
            "name": f"reuse-{algorithm}",
            "algorithm": algorithm,
            **SPECS[algorithm],
            "model": {"fcnet_hiddens": [16]},
            "stop": {"training_iteration": 3},
            "resources": {"num_env_runners": runners},
            "max_concurrent_trials": 1,
        }
    )
    a, b = {"lr": 1.0e-3}, {"lr": 3.0e-4}
    runs = [
        {"of": "a", "values": a, "seed": 5},
        {"of": "b", "values": b, "seed": 9},
        {"of": "a", "values": a, "seed": 5},  # the first trial again, on a reused actor
    ]
    tuner = build_tuner(spec, {}, storage_path=str(tmp_path), name="reuse", confirm_runs=runs)
    grid = tuner.fit()
    assert not grid.errors
    # in the order they ran (one at a time)
    frames = sorted(
        (r.metrics_dataframe.sort_values("training_iteration") for r in grid),
        key=lambda df: df["timestamp"].iloc[0],
    )
    assert [set(df["tuner/seed"]) for df in frames] == [{s["seed"]} for s in runs]
    # one actor process ran the three trials, one after another
    assert len({int(df["pid"].iloc[0]) for df in frames}) == 1
    assert all(list(df["training_iteration"]) == [1, 2, 3] for df in frames)
    # each trial's counters start again from zero
    assert all(0 < df[STEPS].iloc[0] < df[STEPS].iloc[1] < df[STEPS].iloc[2] for df in frames)
    assert all(df[STEPS].iloc[0] < 256 for df in frames)
    # the second trial ran its own config and seed
    lrs = [c for c in frames[1].columns if c.startswith("tuner/optimizer_lr/")]
    assert lrs
    assert all(frames[1][c].iloc[0] == pytest.approx(b["lr"]) for c in lrs)
    # the third (reused actor) trained as the first (fresh actor): same returns and losses
    first, again = frames[0], frames[2]
    loss = f"learners/default_policy/{LOSS[algorithm]}"
    for column in (STEPS, RETURN, loss):
        assert list(again[column]) == pytest.approx(list(first[column]), nan_ok=True), column
    assert list(frames[1][loss]) != pytest.approx(list(first[loss]))


def test_a_reset_stops_the_old_algorithm_and_its_monitor_thread(ray_local):
    """What a reused actor must not keep: the old Learner (freed before the new one is
    built) and Trainable's system-usage monitor thread (one, not one per trial)."""
    import threading
    import weakref

    from ray.tune.utils.util import UtilMonitor

    from tuner.rllib import trainable_for
    from tuner.rllib._trainables import optimizer_lrs
    from tuner.sweep import trial_params

    spec = parse_spec(
        {
            "name": "reset",
            "algorithm": "PPO",
            **SPECS["PPO"],
            "model": {"fcnet_hiddens": [16]},
            "resources": {"num_env_runners": 0},
        }
    )
    algo = trainable_for(spec)(config={**trial_params(spec), "seed": 3})
    try:
        algo.train()
        for lr in (1.0e-3, 3.0e-4):
            (old,) = [c.get() for c in algo.learner_group.foreach_learner(weakref.ref)]
            assert algo.reset_config({**trial_params(spec), "seed": 3, "lr": lr})
            assert old() is None  # the old Learner (model, optimizer) is gone
            algo.train()
            (lrs,) = [c.get() for c in algo.learner_group.foreach_learner(optimizer_lrs)]
            assert list(lrs.values()) == [pytest.approx(lr)]
        monitors = [t for t in threading.enumerate() if isinstance(t, UtilMonitor)]
        assert len([t for t in monitors if t.is_alive()]) <= 1
    finally:
        algo.stop()
