"""Atari as RLlib's examples run it: ALE/Breakout-v5 with `wrappers: atari`, one tiny
iteration per algorithm through the real path (run_sweep: Tune, RLlib, MLflow)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tuner import mlflow_names as names
from tuner.rllib import evaluate_checkpoint
from tuner.rllib._envs import ATARI_OBS_SHAPE
from tuner.rllib._evaluate import MODULE_DIR
from tuner.rllib._settings import ATARI_CONV_FILTERS
from tuner.spec import parse_spec
from tuner.sweep import run_sweep
from tuner.tracking import TrackingConfig

pytestmark = pytest.mark.integration

TINY = {
    "PPO": {"train_batch_size_per_learner": 64, "minibatch_size": 32, "num_epochs": 1},
    "DQN": {
        "train_batch_size_per_learner": 16,
        "num_steps_sampled_before_learning_starts": 32,
        "min_sample_timesteps_per_iteration": 64,
        "replay_buffer_config": {"type": "EpisodeReplayBuffer", "capacity": 1000},
    },
}
LOSS = {"PPO": "total_loss", "DQN": "qf_loss"}


def breakout(algorithm: str, num_env_runners: int):
    return parse_spec(
        {
            "name": f"breakout-{algorithm.lower()}",
            "algorithm": algorithm,
            "env": "ALE/Breakout-v5",
            "wrappers": "atari",
            "config": TINY[algorithm],
            "model": {"head_fcnet_hiddens": [32]},
            "search": {"method": "random", "num_samples": 1, "space": {"lr": {"choice": [1e-4]}}},
            "stop": {"training_iteration": 1},
            "checkpoint": {"at_end": True},
            "resources": {"num_env_runners": num_env_runners},
        }
    )


# PPO samples in the trial's own process, DQN in a remote env runner: both are Ray
# workers where nothing but tuner's env creator registers ALE with gymnasium.
@pytest.mark.parametrize("algorithm, num_env_runners", [("PPO", 0), ("DQN", 1)])
def test_breakout_trains_one_iteration_on_84x84x4_frames(
    ray_local, tmp_path, algorithm, num_env_runners
):
    from ray.rllib.core.rl_module.rl_module import RLModule
    from torch import nn

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    summary = run_sweep(
        breakout(algorithm, num_env_runners),
        storage_path=tmp_path / "tune",
        progress=False,
        tracking=TrackingConfig(tracking_uri=uri, artifact_location=(tmp_path / "a").as_uri()),
    )
    (trial,) = summary.trials
    assert trial.status == "TERMINATED", trial.error
    assert trial.iterations == 1
    assert trial.env_steps > 0

    # a finite loss from the learner
    (result_file,) = Path(summary.path).glob("*/result.json")
    (row,) = [json.loads(line) for line in result_file.read_text().splitlines() if line]
    loss = row["learners"]["default_policy"][LOSS[algorithm]]
    assert math.isfinite(loss), row["learners"]["default_policy"]
    assert row["config"]["env"] == "ALE/Breakout-v5+atari"

    # the module was built for the wrapped frames, with the Atari CNN
    module = RLModule.from_checkpoint(str(Path(trial.checkpoint) / MODULE_DIR))
    assert module.observation_space.shape == ATARI_OBS_SHAPE
    assert module.action_space.n == 4
    convs = [m for m in module.modules() if isinstance(m, nn.Conv2d)]
    # (DQN's target network has its own copy of the encoder)
    assert [(c.out_channels, c.kernel_size, c.stride) for c in convs[:3]] == [
        (32, (8, 8), (4, 4)),
        (64, (4, 4), (2, 2)),
        (64, (3, 3), (1, 1)),
    ]
    assert convs[0].in_channels == ATARI_OBS_SHAPE[-1]

    # MLflow shows the wrappers and the CNN the trial got
    client = MlflowClient(tracking_uri=uri)
    params = client.get_run(trial.mlflow_run_id).data.params
    assert params["wrappers"] == "atari"
    assert params["env"] == "ALE/Breakout-v5"
    assert json.loads(params["fixed.model_config/conv_filters"]) == ATARI_CONV_FILTERS
    local = client.download_artifacts(
        trial.mlflow_run_id, names.RLLIB_CONFIG_ARTIFACT, str(tmp_path)
    )
    logged = json.loads(Path(local).read_text())
    assert logged["_model_config"]["conv_filters"] == ATARI_CONV_FILTERS
    assert logged["env_config"]["frameskip"] == 1

    # and `tuner evaluate` rebuilds the wrapped env from the checkpoint alone
    evaluation = evaluate_checkpoint(trial.checkpoint, episodes=1, max_steps=30)
    assert evaluation.env == "ALE/Breakout-v5"
    assert evaluation.episodes == 1
    assert 1 <= evaluation.lengths[0] <= 30
