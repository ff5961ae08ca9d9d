"""DQN and SAC trials on the flat replay path (tuner/rllib/_fast_replay.py): taken only
where it is the same algorithm, the batches it trains on are the ones RLlib's learner
connector builds from its own buffer, and the update ratio is RLlib's."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.replay_trials import replay_trial
from tuner.rllib import trainable_for
from tuner.spec import parse_spec
from tuner.sweep import trial_params

pytestmark = pytest.mark.integration

UNIFORM = {"type": "EpisodeReplayBuffer", "capacity": 10_000}


PRIORITIZED = {"type": "PrioritizedEpisodeReplayBuffer", "alpha": 0.6, "beta": 0.4}


@pytest.mark.parametrize("buffer", [UNIFORM, PRIORITIZED], ids=["uniform", "prioritized"])
@pytest.mark.parametrize("algorithm", ["DQN", "SAC"])
def test_rllibs_buffers_train_on_the_flat_path_at_rllibs_update_ratio(
    ray_local, monkeypatch, algorithm, buffer
):
    ratios = {}
    for switch in ("1", "0"):
        monkeypatch.setenv("TUNER_FAST_REPLAY", switch)
        algo = replay_trial(
            algorithm,
            {
                "replay_buffer_config": buffer,
                "training_intensity": 4,
                "num_steps_sampled_before_learning_starts": 0,
                "min_time_s_per_iteration": 0,  # iterations end by env steps, not time
            },
        )
        try:
            result = algo.train()
            if switch == "1" and buffer is PRIORITIZED:  # the TD errors became priorities
                assert len(set(algo._flat_replay._priority[: len(algo._flat_replay)])) > 1
        finally:
            algo.stop()
        replay = result["tuner"]["replay"]
        assert replay == "flat" if switch == "1" else replay.startswith("rllib (")
        losses = {k: v for k, v in result["learners"]["default_policy"].items() if "loss" in k}
        assert losses, losses
        assert all(math.isfinite(v) for v in losses.values()), losses
        sampled = result["num_env_steps_sampled_lifetime"]
        trained = result["learners"]["__all_modules__"]["num_env_steps_trained_lifetime"]
        ratios[switch] = (sampled, trained)
    assert ratios["1"] == ratios["0"]  # the same env steps and samples trained
    assert ratios["1"][1] / ratios["1"][0] == pytest.approx(4)


@pytest.mark.parametrize(
    "config, why",
    [
        (
            {"replay_buffer_config": {"type": "MultiAgentEpisodeReplayBuffer"}},
            "not one of RLlib's episode replay buffers",
        ),
        (
            {"replay_buffer_config": UNIFORM, "store_buffer_in_checkpoints": True},
            "replay buffer stored in checkpoints",
        ),
    ],
)
def test_anything_else_keeps_rllibs_path_and_says_why(ray_local, config, why):
    algo = replay_trial("DQN", config)
    try:
        assert algo._flat_replay is None
        assert why in algo._replay_path
    finally:
        algo.stop()


@pytest.mark.parametrize(
    "algorithm, kind, n_step",
    [
        ("DQN", "uniform", 1),
        ("DQN", "uniform", 3),
        ("DQN", "prioritized", 3),
        ("SAC", "uniform", 1),
    ],
)
def test_flat_batches_hold_what_rllibs_connector_builds_from_its_buffer(
    ray_local, algorithm, kind, n_step
):
    """Episodes sampled by the trial's own env runner in two rounds (an episode goes on
    from one to the next) go into both buffers; every row RLlib's buffer + learner
    connector make is a row of the flat batch, column by column: n-step rewards,
    next observation, terminal flags and the n_step column included."""
    from ray.rllib.utils.replay_buffers.episode_replay_buffer import EpisodeReplayBuffer
    from ray.rllib.utils.replay_buffers.prioritized_episode_buffer import (
        PrioritizedEpisodeReplayBuffer,
    )

    gamma = 0.9
    algo = replay_trial(algorithm, {"replay_buffer_config": UNIFORM})
    try:
        assert algo._flat_replay is not None
        flat = type(algo._flat_replay)(1000, seed=0, alpha=0.6 if kind == "prioritized" else None)
        rllib = (
            PrioritizedEpisodeReplayBuffer(capacity=1000, alpha=0.6)
            if kind == "prioritized"
            else EpisodeReplayBuffer(capacity=1000)
        )
        for _ in range(2):
            episodes = algo.env_runner.sample(num_timesteps=100, random_actions=True)
            flat.add(episodes)
            rllib.add(episodes)
        sampled = rllib.sample(
            num_items=64, n_step=n_step, gamma=gamma, beta=0.4, sample_episodes=True
        )
        learner = algo.learner_group._learner
        ours = flat.sample(8000, beta=0.4, n_step=n_step, gamma=gamma)
        theirs = learner._learner_connector(
            rl_module=learner.module, batch={}, episodes=sampled, shared_data={}
        )["default_policy"]
    finally:
        algo.stop()
    theirs = {k: np.asarray(v.cpu() if hasattr(v, "cpu") else v) for k, v in theirs.items()}
    assert set(ours) >= {"obs", "new_obs", "actions", "rewards", "terminateds", "truncateds"}
    assert set(theirs) - set(ours) <= {"infos", "loss_mask", "action_logp", "action_dist_inputs"}
    for i in range(len(theirs["obs"])):
        rows = np.flatnonzero((ours["obs"] == theirs["obs"][i]).all(axis=1))
        assert rows.size, f"row {i} of RLlib's batch is not in the flat batch"
        j = rows[0]
        for column in ("new_obs", "actions", "rewards", "terminateds", "truncateds", "n_step"):
            np.testing.assert_allclose(
                np.asarray(ours[column][j], float),
                np.asarray(theirs[column][i], float),
                rtol=1e-5,
                err_msg=column,
            )
        assert ours["actions"][j].shape == theirs["actions"][i].shape


def test_a_sweep_says_which_replay_path_ran_in_mlflow(ray_local, tmp_path):
    from mlflow.tracking import MlflowClient

    from tests.conftest import tiny_spec
    from tuner.sweep import run_sweep
    from tuner.tracking import TrackingConfig

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    spec = tiny_spec(
        name="flat-sweep",
        algorithm="DQN",
        config={
            "train_batch_size_per_learner": 16,
            "num_steps_sampled_before_learning_starts": 32,
            "min_sample_timesteps_per_iteration": 64,
        },
    )
    tracking = TrackingConfig(tracking_uri=uri, artifact_location=(tmp_path / "a").as_uri())
    summary = run_sweep(spec, storage_path=tmp_path / "tune", progress=False, tracking=tracking)
    assert summary.trials[0].status == "TERMINATED"
    client = MlflowClient(tracking_uri=uri)
    runs = client.search_runs([summary.mlflow.experiment_id])
    child = next(r for r in runs if "mlflow.parentRunId" in r.data.tags)
    # DQN's default prioritized buffer, n_step 1 or 3 from the default space
    assert child.data.tags["tuner.replay"] == "flat"


def test_a_trial_given_the_flat_defaults_off_the_flat_path_refuses_to_run(ray_local, monkeypatch):
    """8 vectorised envs on RLlib's own step would lower the update ratio (its updates per
    round are fixed, a round overshoots): such a trial stops at once and says what to set."""
    spec = parse_spec(
        {
            "name": "flat-defaults-off-path",
            "algorithm": "DQN",
            "env": "CartPole-v1",
            "config": {"train_batch_size_per_learner": 16},
            "model": {"fcnet_hiddens": [16]},
        }
    )
    params = {**trial_params(spec), "seed": 0}  # built where the flat path is on
    assert params["num_envs_per_env_runner"] == 8
    monkeypatch.setenv("TUNER_FAST_REPLAY", "0")  # the trial's process says otherwise
    with pytest.raises(Exception, match="resources.num_envs_per_env_runner"):
        trainable_for(spec)(config=params)


def test_sac_with_sb3_shaped_q_networks_trains_on_the_flat_path(ray_local):
    """`model.q_encoder: concat` (tuner/rllib/_sac_model.py) in a real trial: SB3's
    network shapes, finite losses, RLlib's update ratio."""
    spec = parse_spec(
        {
            "name": "sac-concat",
            "algorithm": "SAC",
            "env": "Pendulum-v1",
            "config": {
                "train_batch_size_per_learner": 16,
                "training_intensity": 16,
                "num_steps_sampled_before_learning_starts": 0,
                "min_sample_timesteps_per_iteration": 32,
                "min_time_s_per_iteration": 0,
                "replay_buffer_config": UNIFORM,
            },
            "model": {"fcnet_hiddens": [32, 32], "head_fcnet_hiddens": [], "q_encoder": "concat"},
        }
    )
    algo = trainable_for(spec)(config={**trial_params(spec), "seed": 0})
    try:
        module = algo.learner_group._learner.module["default_policy"]
        assert type(module.qf_encoder).__name__ == "ConcatQEncoder"
        result = algo.train()
    finally:
        algo.stop()
    assert result["tuner"]["replay"] == "flat"
    losses = {k: v for k, v in result["learners"]["default_policy"].items() if "loss" in k}
    assert losses, losses
    assert all(math.isfinite(v) for v in losses.values()), losses
    sampled = result["num_env_steps_sampled_lifetime"]
    trained = result["learners"]["__all_modules__"]["num_env_steps_trained_lifetime"]
    assert trained == 16 * sampled


@pytest.mark.parametrize(
    ("switch", "lean"),
    [("REDUCE_EACH_UPDATE", False), ("TENSOR_BATCHES", True), ("LEAN_WEIGHT_SYNC", True)],
    ids=["one-reduce-an-iteration", "tensor-batches", "in-place-weight-sync"],
)
@pytest.mark.parametrize("algorithm", ["DQN", "SAC"])
def test_the_lean_flat_path_trains_the_very_same_weights_and_reports_the_same(
    ray_local, monkeypatch, algorithm, switch, lean
):
    """A uniform buffer's learner metrics are reduced once an iteration, after its last
    round (_fast_replay.end_iteration), and a local CPU Learner gets its batches as
    tensors, and the env runner gets the Learner's weights copied in place: same seed,
    same batches, same target-network checks, so the weights (the Learner's and the env
    runner's) come out bit for bit those of a reduce after every update / of RLlib's own
    conversion / of RLlib's weight sync, and the counters, the weights' version and the
    reported loss metrics are the same."""
    import torch

    from tuner.rllib import _fast_replay

    runs = {}
    for value in (False, True):
        monkeypatch.setattr(_fast_replay, switch, value)
        algo = replay_trial(
            algorithm,
            {
                "replay_buffer_config": UNIFORM,
                "training_intensity": 8,  # 8 updates a round: 7 without a reduce
                "num_steps_sampled_before_learning_starts": 0,
                "min_time_s_per_iteration": 0,
                "target_network_update_freq": 8 if algorithm == "DQN" else 0,
            },
        )
        try:
            results = [algo.train() for _ in range(2)]
            assert algo._replay_path == "flat"
            state = algo.learner_group._learner.module["default_policy"].state_dict()
            weights = {k: v.detach().clone() for k, v in state.items()}
            acting = {k: v.clone() for k, v in algo.env_runner.module.state_dict().items()}
        finally:
            algo.stop()
        learners = results[-1]["learners"]
        losses = {k: v for k, v in learners["default_policy"].items() if "loss" in k or "qf" in k}
        runs[value == lean] = (
            {**weights, **{f"env runner: {k}": v for k, v in acting.items()}},
            losses,
            results[-1]["env_runners"]["weights_seq_no"],
            results[-1]["num_env_steps_sampled_lifetime"],
            learners["__all_modules__"]["num_env_steps_trained_lifetime"],
            learners["default_policy"]["num_module_steps_trained_lifetime"],
        )
    (ours, losses, *counters), (rllibs, their_losses, *their_counters) = runs[True], runs[False]
    assert counters == their_counters
    assert counters[0] > 0  # the env runner's weights' version: synced
    assert counters[2] / counters[1] == pytest.approx(8)
    assert "qf_loss" in losses
    # each stat's mean over the iteration's updates, summed in float64 or by RLlib
    assert losses == pytest.approx(their_losses, rel=1e-6)
    assert ours.keys() == rllibs.keys()
    assert ours
    for key in ours:
        assert torch.equal(ours[key], rllibs[key]), key


def test_remote_env_runners_get_their_weights_through_rllibs_sync(ray_local):
    """The in-place sync is for a local env runner only: with a remote one it copies
    nothing, and RLlib's sync hands it the Learner's weights."""
    import torch

    from tuner.ray_internals import sync_local_weights

    algo = replay_trial(
        "DQN",
        {"replay_buffer_config": UNIFORM, "num_steps_sampled_before_learning_starts": 0},
        resources={"num_env_runners": 1},
    )
    try:
        algo.train()
        assert algo._replay_path == "flat"
        in_place = sync_local_weights(algo)
        learned = algo.learner_group._learner.module["default_policy"].state_dict()
        (remote,) = algo.env_runner_group.foreach_env_runner(
            lambda runner: {k: v.clone() for k, v in runner.module.state_dict().items()},
            local_env_runner=False,
        )
    finally:
        algo.stop()
    assert in_place is False
    assert remote
    for key, value in remote.items():
        assert torch.equal(value, learned[key]), key


@pytest.mark.parametrize("switch", ["1", "0"])
def test_a_remote_env_runner_trains_the_updates_per_env_step_asked(ray_local, monkeypatch, switch):
    """One remote env runner, a sampled updates_per_env_step of 0.5 at batch 16: the trial
    trains 8 samples per env step on either path (RLlib's round robin counts the local
    env runner too, which would make it 16)."""
    from tuner.rllib import apply_values
    from tuner.search_spaces import UPDATES_PER_ENV_STEP

    monkeypatch.setenv("TUNER_FAST_REPLAY", switch)
    spec = parse_spec(
        {
            "name": "remote-ratio",
            "algorithm": "DQN",
            "env": "CartPole-v1",
            "config": {
                "train_batch_size_per_learner": 16,
                "num_steps_sampled_before_learning_starts": 0,
                "min_sample_timesteps_per_iteration": 64,
                "min_time_s_per_iteration": 0,
                "replay_buffer_config": UNIFORM,
            },
            "model": {"fcnet_hiddens": [16]},
            "resources": {"num_env_runners": 1, "num_envs_per_env_runner": 1},
        }
    )
    params = apply_values(trial_params(spec), {UPDATES_PER_ENV_STEP: 0.5})
    algo = trainable_for(spec)(config={**params, "seed": 0})
    try:
        for _ in range(2):
            result = algo.train()
    finally:
        algo.stop()
    sampled = result["num_env_steps_sampled_lifetime"]
    trained = result["learners"]["__all_modules__"]["num_env_steps_trained_lifetime"]
    assert sampled >= 128
    assert trained / sampled == pytest.approx(8, rel=0.15)
