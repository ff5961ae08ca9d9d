"""Evaluate a checkpoint: restore its policy (a multi-agent sweep's: each policy, agents
mapped as in the spec) and play N deterministic episodes."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, Field

from tuner.mlflow_names import (
    AGENT_RETURNS,
    MODELS_URI,
    MODULE_RETURNS,
    RUNS_URI,
    parse_model_version_uri,
)
from tuner.rllib._envs import make_env, register_env
from tuner.rllib._observations import filter_from_checkpoint
from tuner.rllib._trainables import CHECKPOINT_META
from tuner.spec import MultiAgentSpec

RL_MODULE_DIR = Path("learner_group", "learner", "rl_module")
MODULE_DIR = RL_MODULE_DIR / "default_policy"


class Evaluation(BaseModel):
    """Returns of N deterministic episodes of a checkpoint's policy."""

    checkpoint: str
    env: str
    episodes: int
    mean_return: float
    std_return: float
    returns: list[float] = Field(
        default_factory=list, description="Each episode's return (multi-agent: summed)."
    )
    lengths: list[int] = Field(default_factory=list)
    agent_returns: dict[str, list[float]] = Field(
        default_factory=dict, description="Multi-agent: each agent's return per episode."
    )
    module_returns: dict[str, list[float]] = Field(
        default_factory=dict,
        description="Multi-agent: each policy's return per episode (its agents' summed).",
    )

    def score(self, metric: str) -> float:
        """The mean return the spec's metric names: one agent's or one policy's
        (`.../agent_episode_returns_mean/<id>`, `.../module_episode_returns_mean/<id>`),
        else the mean (summed) return."""
        key = metric.removeprefix("evaluation/")
        for group, per_id in (
            (AGENT_RETURNS, self.agent_returns),
            (MODULE_RETURNS, self.module_returns),
        ):
            ident = key.removeprefix(group + "/")
            if ident != key and per_id.get(ident):
                return float(np.mean(per_id[ident]))
        return self.mean_return


def resolve_checkpoint(checkpoint: str, tracking_uri: str | None, dest: Path) -> Path:
    """A local checkpoint directory for a path, runs:/ or models:/ URI, or a URI of the
    Tune storage (s3://, gs://, file://: downloaded to `dest` through pyarrow, as Tune
    reads it)."""
    if checkpoint.startswith((RUNS_URI, MODELS_URI)):
        os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
        import mlflow.artifacts
        from mlflow.exceptions import MlflowException
        from mlflow.tracking import MlflowClient

        uri = checkpoint
        model = parse_model_version_uri(checkpoint)
        client = MlflowClient(tracking_uri=tracking_uri, registry_uri=tracking_uri)
        if model is not None:
            name, version = model
            try:
                uri = client.get_model_version(name, version or "1").source
            except MlflowException:
                raise FileNotFoundError(_no_model(client, name, version or "1")) from None
        try:
            local = mlflow.artifacts.download_artifacts(
                artifact_uri=uri, dst_path=str(dest), tracking_uri=tracking_uri
            )
        except MlflowException as err:
            first = str(err).strip().splitlines()[0][:300] if str(err).strip() else ""
            raise FileNotFoundError(f"cannot download {uri} from {tracking_uri}: {first}") from None
        return Path(local)
    if "://" in checkpoint:
        import pyarrow.fs as pafs

        fs, remote = pafs.FileSystem.from_uri(checkpoint)
        path = dest / (Path(remote).name or "checkpoint")
        if fs.get_file_info(remote).type == pafs.FileType.Directory:
            pafs.copy_files(remote, str(path), source_filesystem=fs)
    else:
        path = Path(checkpoint).expanduser()
    if not (path / RL_MODULE_DIR).is_dir():
        raise FileNotFoundError(
            f"{checkpoint} is not an RLlib algorithm checkpoint (no {RL_MODULE_DIR})"
        )
    return path


def _no_model(client: Any, name: str, version: str) -> str:
    """One line: the model version that is not there, and what the registry has."""
    try:
        versions = [v.version for v in client.search_model_versions(f"name='{name}'")]
    except Exception:  # noqa: BLE001 - the message only
        versions = []
    if versions:
        have = f"{name} has versions {', '.join(sorted(versions, key=int))}"
    else:
        try:
            names = sorted(m.name for m in client.search_registered_models(max_results=20))
        except Exception:  # noqa: BLE001
            names = []
        have = "registered models: " + (", ".join(names) if names else "none")
    return f"no model version {name}/{version} in {client.tracking_uri}; {have}"


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
    """Mean return of `episodes` deterministic episodes of a checkpoint's policy; for a
    multi-agent sweep's checkpoint, summed over agents, and per agent and per policy in
    `agent_returns` / `module_returns` (`Evaluation.score(metric)` picks the metric's)."""
    from ray.rllib.core.rl_module.rl_module import RLModule

    with tempfile.TemporaryDirectory() as tmp:
        path = resolve_checkpoint(checkpoint, tracking_uri, Path(tmp))
        meta_file = path / CHECKPOINT_META
        if not meta_file.exists():
            raise FileNotFoundError(
                f"{checkpoint} has no {CHECKPOINT_META}: it was not written by a tuner sweep"
            )
        meta = json.loads(meta_file.read_text())
        multi_agent = (
            MultiAgentSpec.model_validate(meta["multi_agent"]) if meta.get("multi_agent") else None
        )
        # the observations as the policy saw them (normalize_observations), else as is
        seen = filter_from_checkpoint(path) or _as_is
        if multi_agent is None:
            modules = {None: RLModule.from_checkpoint(str(path / MODULE_DIR))}
        elif render_to is not None:
            raise ValueError("rendering plays single-agent checkpoints only")
        else:
            modules = {
                pid: RLModule.from_checkpoint(str(path / RL_MODULE_DIR / pid))
                for pid in multi_agent.policies
            }
    wrappers = meta.get("wrappers")  # absent from checkpoints of tuner < Atari support
    register_env(meta["env"], wrappers)
    env_config = dict(meta.get("env_config") or {})
    if render_to is not None and ":" not in meta["env"]:
        env_config["render_mode"] = "rgb_array"
    env = make_env(meta["env"], env_config, wrappers)
    out = Evaluation(
        checkpoint=checkpoint, env=meta["env"], episodes=episodes, mean_return=0.0, std_return=0.0
    )
    try:
        for episode in range(episodes):
            if multi_agent is None:
                total, steps = _single_agent_episode(
                    env, modules[None], seed + episode, max_steps, render_to, episode == 0, seen
                )
            else:
                total, steps = _multi_agent_episode(
                    env, modules, multi_agent, seed + episode, max_steps, out, seen
                )
            out.returns.append(total)
            out.lengths.append(steps)
    finally:
        env.close()
    out.mean_return = float(np.mean(out.returns))
    out.std_return = float(np.std(out.returns))
    return out


def _as_is(agent: Any, obs: Any) -> Any:
    return obs


def _single_agent_episode(
    env: Any,
    module: Any,
    seed: int,
    max_steps: int,
    render_to: Path | None,
    render: bool,
    seen: Callable[[Any, Any], Any] = _as_is,
) -> tuple[float, int]:
    obs, _ = env.reset(seed=seed)
    total, steps, done, frames = 0.0, 0, False, []
    while not done and steps < max_steps:
        if render_to is not None and render:
            frames.append(env.render())
        obs, reward, terminated, truncated, _ = env.step(_act(module, seen(None, obs)))
        total += float(reward)
        steps += 1
        done = terminated or truncated
    if frames and render_to is not None:
        _save_frames(frames, render_to)
    return total, steps


def _multi_agent_episode(
    env: Any,
    modules: dict[Any, Any],
    multi_agent: MultiAgentSpec,
    seed: int,
    max_steps: int,
    out: Evaluation,
    seen: Callable[[Any, Any], Any] = _as_is,
) -> tuple[float, int]:
    """One episode of a MultiAgentEnv (RLlib's conventions): each agent that observes and
    has not ended acts by its policy's module; returns per agent and per policy go into
    `out`."""
    obs, _ = env.reset(seed=seed)
    per_agent: dict[str, float] = {}
    steps, done = 0, False
    while not done and steps < max_steps:
        actions = {
            agent: _act(modules[multi_agent.policy_of(agent)], seen(agent, agent_obs))
            for agent, agent_obs in obs.items()
        }
        obs, rewards, terminateds, truncateds, _ = env.step(actions)
        for agent, reward in rewards.items():
            per_agent[str(agent)] = per_agent.get(str(agent), 0.0) + float(reward)
        steps += 1
        done = bool(terminateds.get("__all__") or truncateds.get("__all__"))
        # an agent whose episode ended sends its last observation but acts no more
        obs = {a: o for a, o in obs.items() if not (terminateds.get(a) or truncateds.get(a))}
    per_module: dict[str, float] = {}
    for agent, total in per_agent.items():
        out.agent_returns.setdefault(agent, []).append(total)
        pid = multi_agent.policy_of(agent)
        per_module[pid] = per_module.get(pid, 0.0) + total
    for pid, total in per_module.items():
        out.module_returns.setdefault(pid, []).append(total)
    return sum(per_agent.values()), steps


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
