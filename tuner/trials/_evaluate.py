"""Evaluate a checkpoint: restore its policy and play N deterministic episodes."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, Field

from tuner.trials._algorithms import CHECKPOINT_META
from tuner.trials._envs import make_env, register_env

MODULE_DIR = Path("learner_group", "learner", "rl_module", "default_policy")


class Evaluation(BaseModel):
    """Returns of N deterministic episodes of a checkpoint's policy."""

    checkpoint: str
    env: str
    episodes: int
    mean_return: float
    std_return: float
    returns: list[float] = Field(default_factory=list)
    lengths: list[int] = Field(default_factory=list)


def resolve_checkpoint(checkpoint: str, tracking_uri: str | None, dest: Path) -> Path:
    """A local checkpoint directory for a path, runs:/ or models:/ URI."""
    if checkpoint.startswith(("runs:/", "models:/")):
        os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
        import mlflow.artifacts
        from mlflow.tracking import MlflowClient

        uri = checkpoint
        if checkpoint.startswith("models:/"):
            name, _, version = checkpoint.removeprefix("models:/").partition("/")
            client = MlflowClient(tracking_uri=tracking_uri, registry_uri=tracking_uri)
            uri = client.get_model_version(name, version or "1").source
        local = mlflow.artifacts.download_artifacts(
            artifact_uri=uri, dst_path=str(dest), tracking_uri=tracking_uri
        )
        return Path(local)
    path = Path(checkpoint).expanduser()
    if not (path / MODULE_DIR).is_dir():
        raise FileNotFoundError(
            f"{checkpoint} is not an RLlib algorithm checkpoint (no {MODULE_DIR})"
        )
    return path


def _act(module: Any, obs: Any) -> Any:
    import torch

    batch = {"obs": torch.as_tensor(np.asarray(obs, dtype=np.float32)[None])}
    with torch.no_grad():
        out = module.forward_inference(batch)
    if "actions" in out:
        action = out["actions"]
    else:
        dist = module.get_inference_action_dist_cls().from_logits(out["action_dist_inputs"])
        action = dist.to_deterministic().sample()
    return action[0].cpu().numpy()


def evaluate_checkpoint(
    checkpoint: str,
    *,
    episodes: int = 10,
    tracking_uri: str | None = None,
    render_to: Path | None = None,
    seed: int = 0,
    max_steps: int = 100_000,
) -> Evaluation:
    """Mean return of `episodes` deterministic episodes of a checkpoint's policy."""
    from ray.rllib.core.rl_module.rl_module import RLModule

    with tempfile.TemporaryDirectory() as tmp:
        path = resolve_checkpoint(checkpoint, tracking_uri, Path(tmp))
        meta_file = path / CHECKPOINT_META
        if not meta_file.exists():
            raise FileNotFoundError(
                f"{checkpoint} has no {CHECKPOINT_META}: it was not written by a tuner sweep"
            )
        meta = json.loads(meta_file.read_text())
        module = RLModule.from_checkpoint(str(path / MODULE_DIR))
    wrappers = meta.get("wrappers")  # absent from checkpoints of tuner < Atari support
    register_env(meta["env"], wrappers)
    env_config = dict(meta.get("env_config") or {})
    if render_to is not None and ":" not in meta["env"]:
        env_config["render_mode"] = "rgb_array"
    env = make_env(meta["env"], env_config, wrappers)
    returns, lengths = [], []
    try:
        for episode in range(episodes):
            obs, _ = env.reset(seed=seed + episode)
            total, steps, done, frames = 0.0, 0, False, []
            while not done and steps < max_steps:
                if render_to is not None and episode == 0:
                    frames.append(env.render())
                obs, reward, terminated, truncated, _ = env.step(_act(module, obs))
                total += float(reward)
                steps += 1
                done = terminated or truncated
            returns.append(total)
            lengths.append(steps)
            if frames and render_to is not None:
                _save_frames(frames, render_to)
    finally:
        env.close()
    return Evaluation(
        checkpoint=checkpoint,
        env=meta["env"],
        episodes=episodes,
        mean_return=float(np.mean(returns)),
        std_return=float(np.std(returns)),
        returns=returns,
        lengths=lengths,
    )


def _save_frames(frames: list, directory: Path) -> None:
    from PIL import Image

    directory.mkdir(parents=True, exist_ok=True)
    images = [Image.fromarray(np.asarray(f)) for f in frames if f is not None]
    if images:
        images[0].save(
            directory / "episode_0.gif",
            save_all=True,
            append_images=images[1:],
            duration=33,
            loop=0,
        )
