"""Evaluate a checkpoint: restore its policy (a multi-agent sweep's: each policy, agents
mapped as in the spec) and play N deterministic episodes."""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, Field

from tuner.errors import TunerError
from tuner.mlflow_names import (
    AGENT_RETURNS,
    LATEST_VERSION,
    MODELS_URI,
    MODULE_RETURNS,
    RUNS_URI,
    parse_model_alias_uri,
    parse_model_version_uri,
)
from tuner.rllib._envs import make_env, register_env
from tuner.rllib._observations import filter_from_checkpoint
from tuner.rllib._trial_config import CHECKPOINT_META
from tuner.spec import MultiAgentSpec

RL_MODULE_DIR = Path("learner_group", "learner", "rl_module")
MODULE_DIR = RL_MODULE_DIR / "default_policy"
# episodes played side by side at most (a trial's final evaluation plays 10): more are
# played in groups of this many, so that `--episodes 20` plays the first ten as the
# trial's final evaluation did, and a hundred Atari envs are never open at once
SIDE_BY_SIDE = 10


class Evaluation(BaseModel):
    """Returns of N deterministic episodes of a checkpoint's policy."""

    checkpoint: str
    env: str
    episodes: int
    seed: int = Field(0, description="Episode i started from seed + i.")
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
        """The mean return the spec's metric names.

        One agent's or one policy's (`.../agent_episode_returns_mean/<id>`,
        `.../module_episode_returns_mean/<id>`), else the mean (summed) return.

        Args:
            metric: The spec's metric.

        Returns:
            The mean return.
        """
        key = metric.removeprefix("evaluation/")
        for group, per_id in (
            (AGENT_RETURNS, self.agent_returns),
            (MODULE_RETURNS, self.module_returns),
        ):
            ident = key.removeprefix(group + "/")
            if ident != key and per_id.get(ident):
                return float(np.mean(per_id[ident]))
        return self.mean_return


class NoTrackingStore(TunerError, FileNotFoundError):
    """A runs:/ or models:/ URI to read from an SQLite tracking store that does not exist.

    MLflow would create an empty one to answer, so it is not asked.
    """


def resolve_checkpoint(checkpoint: str, tracking_uri: str | None, dest: Path) -> Path:
    """A local checkpoint directory for a path, runs:/ or models:/ URI (a version, `latest`
    or an @alias), or a URI of the Tune storage (s3://, gs://, file://: downloaded to
    `dest` through pyarrow, as Tune reads it)."""
    if checkpoint.startswith((RUNS_URI, MODELS_URI)):
        os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
        import mlflow
        import mlflow.artifacts
        from mlflow.exceptions import MlflowException
        from mlflow.tracking import MlflowClient

        tracking_uri = tracking_uri or mlflow.get_tracking_uri()
        _require_store(tracking_uri)
        client = MlflowClient(tracking_uri=tracking_uri, registry_uri=tracking_uri)
        uri = checkpoint
        try:
            if checkpoint.startswith(MODELS_URI):
                uri = _model_source(client, checkpoint)
            local = mlflow.artifacts.download_artifacts(
                artifact_uri=uri, dst_path=str(dest), tracking_uri=tracking_uri
            )
        except MlflowException as err:
            # a registry that cannot answer, or a source that cannot be downloaded
            raise FileNotFoundError(
                f"cannot read {uri} from {tracking_uri}: {_first_line(err)}"
            ) from None
        return Path(local)
    if "://" in checkpoint:
        import pyarrow.fs as pafs

        fs, remote = pafs.FileSystem.from_uri(checkpoint)
        if fs.get_file_info(remote).type != pafs.FileType.Directory:
            raise FileNotFoundError(f"no such directory: {checkpoint}")
        path = dest / (Path(remote).name or "checkpoint")
        pafs.copy_files(remote, str(path), source_filesystem=fs)
    else:
        path = Path(checkpoint).expanduser()
        if not path.is_dir():
            raise FileNotFoundError(
                f"not a directory: {path}" if path.exists() else f"no such directory: {path}"
            )
    if not (path / RL_MODULE_DIR).is_dir():
        raise FileNotFoundError(
            f"{checkpoint} is not an RLlib algorithm checkpoint (no {RL_MODULE_DIR})"
        )
    return path


def _require_store(tracking_uri: str) -> None:
    """NoTrackingStore if `tracking_uri` is an SQLite file that is not there: opening it
    would create an empty store (tables and all) as a side effect of a read."""
    if not tracking_uri.startswith("sqlite:"):
        return  # a server or another database: nothing is created by asking it
    from sqlalchemy.engine import make_url

    database = make_url(tracking_uri).database
    if database and database != ":memory:" and not Path(database).exists():
        raise NoTrackingStore(f"no MLflow tracking store at {database} ({tracking_uri})")


def _first_line(err: Exception) -> str:
    text = str(err).strip()
    return text.splitlines()[0][:300] if text else type(err).__name__


def _model_source(client: Any, checkpoint: str) -> str:
    """The source (a runs:/ URI) of the registered model version a models:/ URI names:
    models:/<name>/<version>, models:/<name>/latest (the newest version),
    models:/<name>@<alias>, or models:/<name> (version 1). FileNotFoundError, naming
    what the registry has, when there is no such version, alias or model; the
    registry's other errors (MlflowException) go to the caller."""
    from mlflow.exceptions import MlflowException

    by_alias = parse_model_alias_uri(checkpoint)
    name, version = by_alias or parse_model_version_uri(checkpoint) or (checkpoint, None)
    try:
        if by_alias is not None:
            return client.get_model_version_by_alias(name, version).source
        version = version or "1"
        if version == LATEST_VERSION:
            numbers = _versions(client, name)
            if not numbers:
                raise FileNotFoundError(_no_model(client, name, version))
            version = str(numbers[-1])
        elif not version.isdigit():
            raise FileNotFoundError(
                f"{version!r} is no version: give a number, {MODELS_URI}{name}/"
                f"{LATEST_VERSION} or {MODELS_URI}{name}@<alias>"
            )
        return client.get_model_version(name, version).source
    except MlflowException as err:
        # MLflow answers an unknown alias with INVALID_PARAMETER_VALUE, the rest with
        # RESOURCE_DOES_NOT_EXIST; any other error is the registry's, not the URI's
        missing_codes = {"RESOURCE_DOES_NOT_EXIST"}
        if by_alias is not None:
            missing_codes.add("INVALID_PARAMETER_VALUE")
        if err.error_code not in missing_codes:
            raise
        missing = f"@{version}" if by_alias is not None else str(version)
        raise FileNotFoundError(_no_model(client, name, missing)) from None


def _versions(client: Any, name: str) -> list[int]:
    """The version numbers of a registered model, ascending ([] for none or no model).
    MLflow's model versions carry their number as an int or a str by store: int() both."""
    found = client.search_model_versions(f"name='{name}'")
    return sorted(int(v.version) for v in found)


def _no_model(client: Any, name: str, version: str) -> str:
    """One line: the model version (a number, `latest` or `@alias`) that is not there,
    and what the registry has: the model's versions and aliases, else its models."""
    try:
        model = client.get_registered_model(name)
    except Exception:  # noqa: BLE001 - the message only: no such model, or unreadable
        model = None
    try:
        versions = _versions(client, name) if model is not None else []
    except Exception:  # noqa: BLE001
        versions = []
    missing = (
        f"no alias {version} of model {name}"
        if version.startswith("@")
        else f"no model version {name}/{version}"
    )
    if model is None:
        try:
            names = sorted(m.name for m in client.search_registered_models(max_results=20))
        except Exception:  # noqa: BLE001
            names = []
        have = "registered models: " + (", ".join(names) if names else "none")
    else:
        have = (
            f"{name} has versions {', '.join(map(str, versions))}"
            if versions
            else f"{name} has no versions"
        )
        aliases = getattr(model, "aliases", None) or {}
        if aliases:
            have += "; aliases " + ", ".join(
                f"@{a} (version {v})" for a, v in sorted(aliases.items())
            )
    return f"{missing} in {client.tracking_uri}; {have}"


def _act(module: Any, observations: np.ndarray) -> np.ndarray:
    """The module's deterministic actions for a batch of observations (one row each)."""
    import torch

    batch = {"obs": torch.as_tensor(observations)}
    with torch.no_grad():
        out = module.forward_inference(batch)
    if "actions" in out:
        action = out["actions"]
    else:
        dist = module.get_inference_action_dist_cls().from_logits(out["action_dist_inputs"])
        action = dist.to_deterministic().sample()
    return action.cpu().numpy()


def evaluate_checkpoint(
    checkpoint: str,
    *,
    episodes: int = 10,
    tracking_uri: str | None = None,
    render_to: Path | None = None,
    seed: int | None = None,
    max_steps: int = 100_000,
) -> Evaluation:
    """Mean return of `episodes` deterministic episodes of a checkpoint's policy.

    For a multi-agent sweep's checkpoint, summed over agents, and per agent and per
    policy in `agent_returns` / `module_returns` (`Evaluation.score(metric)` picks the
    metric's). This is the protocol of a trial's final evaluation, whose score this gives
    again.

    Args:
        checkpoint: A checkpoint directory, or a runs:/ or models:/ URI.
        episodes: How many episodes.
        tracking_uri: The MLflow tracking store a URI is read from.
        render_to: A directory to save the frames of a single-agent checkpoint's episodes.
        seed: Episode i starts from `seed` + i; left out, the seed of the trial that saved
            the checkpoint (0 if it recorded none).
        max_steps: The most steps of one episode.

    Returns:
        The Evaluation.

    Raises:
        FileNotFoundError: No such checkpoint, or one not written by a tuner sweep.
        NoTrackingStore: A URI's SQLite tracking store does not exist.
        ValueError: `render_to` with a multi-agent checkpoint.
    """
    with tempfile.TemporaryDirectory() as tmp:
        path = resolve_checkpoint(checkpoint, tracking_uri, Path(tmp))
        meta_file = path / CHECKPOINT_META
        if not meta_file.exists():
            raise FileNotFoundError(
                f"{checkpoint} has no {CHECKPOINT_META}: it was not written by a tuner sweep"
            )
        meta = json.loads(meta_file.read_text())
        if seed is None:
            seed = int(meta.get("seed") or 0)
        multi_agent = (
            MultiAgentSpec.model_validate(meta["multi_agent"]) if meta.get("multi_agent") else None
        )
        # the observations as the policy saw them (normalize_observations), else as is
        seen = filter_from_checkpoint(path) or _as_is
        with _quiet_rlmodule_config_deprecation():
            modules = _restore_modules(path, multi_agent, render_to)
    wrappers = meta.get("wrappers")  # absent from checkpoints of tuner < Atari support
    register_env(meta["env"], wrappers)
    env_config = dict(meta.get("env_config") or {})
    render_config = dict(env_config)
    if render_to is not None and ":" not in meta["env"]:
        render_config["render_mode"] = "rgb_array"
    out = Evaluation(
        checkpoint=checkpoint,
        env=meta["env"],
        episodes=episodes,
        seed=seed,
        mean_return=0.0,
        std_return=0.0,
    )
    if multi_agent is None:
        for first in range(0, episodes, SIDE_BY_SIDE):
            played = _single_agent_episodes(
                lambda i, first=first: make_env(
                    meta["env"], render_config if first + i == 0 else env_config, wrappers
                ),
                modules[None],
                [seed + e for e in range(first, min(first + SIDE_BY_SIDE, episodes))],
                max_steps,
                render_to if first == 0 else None,
                seen,
            )
            out.returns += [total for total, _ in played]
            out.lengths += [steps for _, steps in played]
    else:
        env = make_env(meta["env"], env_config, wrappers)
        try:
            for episode in range(episodes):
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


# What RLlib 2.60 logs on every RLModule restore: RLModule.__init__ itself builds the
# deprecated RLModuleConfig, so the user (and tuner) can do nothing about it.
RLMODULE_CONFIG_DEPRECATION = "`RLModule(config=[RLModuleConfig object])` has been deprecated"


@contextmanager
def _quiet_rlmodule_config_deprecation() -> Iterator[None]:
    """Drop RLlib's one DeprecationWarning about RLModuleConfig while restoring: RLlib
    logs it (logging, not `warnings`) through the logger of its `deprecation_warning`;
    every other record of that logger, other deprecations included, still shows."""
    from ray.rllib.utils import deprecation_warning

    log = logging.getLogger(deprecation_warning.__module__)

    def keep(record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not (
            message.startswith("DeprecationWarning") and RLMODULE_CONFIG_DEPRECATION in message
        )

    log.addFilter(keep)
    try:
        yield
    finally:
        log.removeFilter(keep)


def _restore_modules(
    path: Path, multi_agent: MultiAgentSpec | None, render_to: Path | None
) -> dict[Any, Any]:
    """The checkpoint's RLModules: {None: module}, or each policy's of a multi-agent sweep."""
    from ray.rllib.core.rl_module.rl_module import RLModule

    if multi_agent is None:
        return {None: RLModule.from_checkpoint(str(path / MODULE_DIR))}
    if render_to is not None:
        raise ValueError("rendering plays single-agent checkpoints only")
    return {
        pid: RLModule.from_checkpoint(str(path / RL_MODULE_DIR / pid))
        for pid in multi_agent.policies
    }


def _as_is(agent: Any, obs: Any) -> Any:
    return obs


def _row(obs: Any) -> np.ndarray:
    """One observation as a batch of one row."""
    return np.asarray(obs, dtype=np.float32)[None]


def _single_agent_episodes(
    make: Callable[[int], Any],
    module: Any,
    seeds: list[int],
    max_steps: int,
    render_to: Path | None,
    seen: Callable[[Any, Any], Any] = _as_is,
) -> list[tuple[float, int]]:
    """The episodes side by side, one env each (episode i reset with seeds[i]): one
    batched forward pass a step for all of them, where one episode after another paid
    RLlib's forward call per env step (nine tenths of a 10-episode evaluation's time).
    The batch keeps its shape to the end (an episode that ended repeats its last
    observation, its action unused), so an episode's actions do not depend on when the
    others end. Episode 0's frames go to `render_to`; `make(i)` builds episode i's env."""
    envs: list[Any] = []
    try:
        for i in range(len(seeds)):  # inside the try: an env that fails closes the others
            envs.append(make(i))
        obs = [env.reset(seed=s)[0] for env, s in zip(envs, seeds, strict=True)]
        totals, steps = [0.0] * len(envs), [0] * len(envs)
        running = [max_steps > 0] * len(envs)
        frames: list[Any] = []
        while any(running):
            if render_to is not None and running[0]:
                frames.append(envs[0].render())
            actions = _act(module, np.concatenate([_row(seen(None, o)) for o in obs]))
            for i, env in enumerate(envs):
                if not running[i]:
                    continue
                obs[i], reward, terminated, truncated, _ = env.step(actions[i])
                totals[i] += float(reward)
                steps[i] += 1
                running[i] = not (terminated or truncated) and steps[i] < max_steps
    finally:
        for env in envs:
            env.close()
    if frames and render_to is not None:
        _save_frames(frames, render_to)
    return list(zip(totals, steps, strict=True))


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
            agent: _act(modules[multi_agent.policy_of(agent)], _row(seen(agent, agent_obs)))[0]
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
