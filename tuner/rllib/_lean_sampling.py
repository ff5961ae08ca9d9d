"""Sampling without RLlib's connector pipelines' per-step overhead: the same batches.

An env runner passes every env step through two connector pipelines: env-to-module (five
pieces) before the module's forward pass, module-to-env (six pieces) after it. Each piece
runs under a timer of its own and regroups the data per episode and back, also where it
has nothing to do (no RNN state, one agent). For the default pipelines of a single-agent
runner of a stateless torch module on a Box observation space, those eleven pieces come
down to: stack each episode's last observation into a tensor; turn the module's output
into actions (RLlib's own GetActions piece: the same draws from the same distributions);
numpy rows per env; the actions unsquashed or clipped for the env. That is what the lean
pipelines do, with RLlib's own functions for each step, so the episodes they fill are the
same to the bit (tests/integration/test_lean_sampling.py compares them field by field
with RLlib's for DQN, SAC and PPO). The module's eval() before each step returns at once
where the module is in eval mode already (tuner/rllib/_lean_modes.py).

Any other runner keeps RLlib's pipelines (`why_not` says why): a spec's own connectors or
env runner, an RNN, several agents, a Dict/Tuple observation or action space.
`TUNER_LEAN_SAMPLING=0` keeps them everywhere (for comparisons).
"""

from __future__ import annotations

import functools
import os
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from ray.rllib.connectors.env_to_module import EnvToModulePipeline
from ray.rllib.connectors.module_to_env import ModuleToEnvPipeline
from ray.rllib.core.columns import Columns
from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner
from ray.rllib.utils.metrics import (
    ENV_TO_MODULE_SUM_EPISODES_LENGTH_IN,
    ENV_TO_MODULE_SUM_EPISODES_LENGTH_OUT,
)
from ray.rllib.utils.numpy import convert_to_numpy
from ray.rllib.utils.spaces.space_utils import (
    batch as batch_fn,
)
from ray.rllib.utils.spaces.space_utils import (
    clip_action,
    get_base_struct_from_space,
    unbatch,
    unsquash_action,
)

from tuner.ray_internals import env_runner_pipelines, install_lean_loop
from tuner.rllib import _lean_categorical as categorical
from tuner.rllib._lean_exploration import install_lean_exploration
from tuner.rllib._lean_modes import lean_mode_switches

LEAN_SAMPLING_SWITCH = "TUNER_LEAN_SAMPLING"
# "0": the lean pipelines inside RLlib's own timestep loop (for comparisons)
LEAN_LOOP_SWITCH = "TUNER_LEAN_LOOP"
# RLlib 2.60's default pipelines of a single-agent env runner, piece by piece
ENV_TO_MODULE_PIECES = (
    "AddObservationsFromEpisodesToBatch",
    "AddTimeDimToBatchAndZeroPad",
    "AddStatesFromEpisodesToBatch",
    "BatchIndividualItems",
    "NumpyToTensor",
)
MODULE_TO_ENV_PIECES = (
    "GetActions",
    "TensorToNumpy",
    "UnBatchToIndividualItems",
    "RemoveSingleTsTimeRankFromBatch",
    "NormalizeAndClipActions",
    "ListifyDataForVectorEnv",
)
ACTION_COLUMNS = (Columns.ACTIONS, Columns.ACTIONS_FOR_ENV)


def lean_sampling_on() -> bool:
    """Whether trials take the lean pipelines where they can (TUNER_LEAN_SAMPLING is
    not "0").

    Returns:
        True unless the switch is off.
    """
    return os.environ.get(LEAN_SAMPLING_SWITCH, "1") != "0"


def _pieces(pipeline: Any) -> tuple[str, ...]:
    """The class names of a pipeline's pieces, each from RLlib itself (else empty)."""
    connectors = getattr(pipeline, "connectors", None) or []
    if any(not type(c).__module__.startswith("ray.rllib.connectors.") for c in connectors):
        return ()
    return tuple(type(c).__name__ for c in connectors)


def why_not(runner: Any) -> str | None:
    """Why an env runner keeps RLlib's pipelines, or None where the lean ones do the same.

    Args:
        runner: An env runner, as built in its process.

    Returns:
        The reason, or None.
    """
    if type(runner) is not SingleAgentEnvRunner:
        return f"env runner {type(runner).__name__}"
    module = getattr(runner, "module", None)
    if module is None or getattr(module, "framework", None) != "torch":
        return "no torch module on the env runner"
    if module.is_stateful():
        return "a stateful (RNN) module"
    to_module, to_env = env_runner_pipelines(runner)
    if type(to_module) is not EnvToModulePipeline or _pieces(to_module) != ENV_TO_MODULE_PIECES:
        return "own env-to-module connectors"
    if type(to_env) is not ModuleToEnvPipeline or _pieces(to_env) != MODULE_TO_ENV_PIECES:
        return "own module-to-env connectors"
    env = getattr(runner, "env", None)
    if env is None:
        return "no env on the env runner"
    if not isinstance(env.single_observation_space, gym.spaces.Box):
        return f"observation space {type(env.single_observation_space).__name__}"
    if not isinstance(env.single_action_space, (gym.spaces.Box, gym.spaces.Discrete)):
        return f"action space {type(env.single_action_space).__name__}"
    return None


class LeanEnvToModule(EnvToModulePipeline):
    """The default env-to-module pipeline of a stateless single-agent module, in one step:
    each episode's last observation, batched, as a tensor (RLlib's NumpyToTensor piece)."""

    def __call__(  # type: ignore[override]
        self,
        *,
        rl_module: Any,
        batch: dict[str, Any] | None = None,
        episodes: list[Any],
        explore: bool | None = None,
        shared_data: dict[str, Any] | None = None,
        metrics: Any = None,
        **kwargs: Any,
    ) -> Any:
        """The module's input for the episodes' next step.

        Args:
            rl_module: The env runner's module.
            batch: The batch so far (none from the env runner; else RLlib's pipeline).
            episodes: The ongoing episodes, one per env.
            explore: Whether the module explores.
            shared_data: Data the two pipelines share within one step.
            metrics: The env runner's metrics logger (no per-piece timers here).
            **kwargs: The env runner's other arguments (passed on to RLlib's pipeline).

        Returns:
            {"obs": tensor}, as RLlib's pipeline gives it.
        """
        if batch or not episodes:
            return super().__call__(
                rl_module=rl_module,
                batch=batch,
                episodes=episodes,
                explore=explore,
                shared_data=shared_data,
                metrics=metrics,
                **kwargs,
            )
        shared_data = shared_data if shared_data is not None else {}
        if metrics:  # the two values EnvToModulePipeline reports
            length = sum(map(len, episodes))
            metrics.log_value(ENV_TO_MODULE_SUM_EPISODES_LENGTH_IN, length)
        observations = [episode.get_observations(-1) for episode in episodes]
        stacked = batch_fn(observations, individual_items_already_have_batch_dim="auto")
        # what UnBatchToIndividualItems reads in RLlib's module-to-env pipeline
        shared_data["memorized_map_structure"] = [episode.id_ for episode in episodes]
        to_tensor = self.connectors[-1]  # RLlib's NumpyToTensor, with its device
        out = to_tensor(
            rl_module=rl_module,
            batch={Columns.OBS: stacked},
            episodes=episodes,
            explore=explore,
            shared_data=shared_data,
        )
        if metrics:
            metrics.log_value(ENV_TO_MODULE_SUM_EPISODES_LENGTH_OUT, length)
        return out


class LeanModuleToEnv(ModuleToEnvPipeline):
    """The default module-to-env pipeline of a stateless single-agent module: RLlib's
    GetActions piece, then numpy rows per env and the actions for the env."""

    def __call__(  # type: ignore[override]
        self,
        *,
        rl_module: Any,
        batch: dict[str, Any],
        episodes: list[Any],
        explore: bool | None = None,
        shared_data: dict[str, Any] | None = None,
        metrics: Any = None,
        **kwargs: Any,
    ) -> Any:
        """The env's actions, and per env the module's other outputs.

        Args:
            rl_module: The env runner's module.
            batch: The module's forward output.
            episodes: The ongoing episodes, one per env.
            explore: Whether the module explores.
            shared_data: Data the two pipelines share within one step.
            metrics: The env runner's metrics logger (no per-piece timers here).
            **kwargs: The env runner's other arguments.

        Returns:
            RLlib's pipeline's output: `actions` and `actions_for_env` batched, each other
            column a list of one row per env.
        """
        return lean_to_env(self, rl_module, batch, episodes, explore, shared_data, rows=True)


def lean_to_env(
    pipeline: Any,
    rl_module: Any,
    batch: dict[str, Any],
    episodes: list[Any],
    explore: Any,
    shared_data: dict[str, Any] | None,
    rows: bool = False,
) -> dict[str, Any]:
    """The default module-to-env pipeline's output for one step.

    Args:
        pipeline: The runner's module-to-env pipeline (RLlib's default pieces).
        rl_module: The env runner's module.
        batch: The module's forward output.
        episodes: The ongoing episodes, one per env.
        explore: Whether the module explores.
        shared_data: Data the two pipelines share within one step.
        rows: Each column but the actions as a list of rows (RLlib's pipeline's form),
            else as the batched array (row i is the same).

    Returns:
        `actions` and `actions_for_env` batched, each other column one row per env.
    """
    get_actions, normalize = pipeline.connectors[0], pipeline.connectors[4]
    if not _lean_categorical_actions(rl_module, batch, explore):
        batch = get_actions(
            rl_module=rl_module,
            batch=batch,
            episodes=episodes,
            explore=explore,
            shared_data=shared_data,
        )
    batch = _to_numpy(batch)
    out: dict[str, Any] = {}
    for column, data in batch.items():
        if isinstance(data, np.ndarray):  # unbatch's rows (views), batch's copy
            if column in ACTION_COLUMNS:
                out[column] = data.copy()
            else:
                out[column] = list(data) if rows else data
        else:
            rows_of = unbatch(data)
            out[column] = batch_fn(rows_of) if column in ACTION_COLUMNS else rows_of
    if normalize.normalize_actions or normalize.clip_actions:
        space = get_base_struct_from_space(normalize.action_space)
        act = unsquash_action if normalize.normalize_actions else clip_action
        actions = out[Columns.ACTIONS]
        if isinstance(actions, np.ndarray) and isinstance(space, gym.spaces.Discrete):
            out[Columns.ACTIONS_FOR_ENV] = actions.copy()  # both change Box parts only
        elif isinstance(actions, np.ndarray) and isinstance(space, gym.Space):
            # elementwise on the batch (the bounds broadcast): each row as per row
            out[Columns.ACTIONS_FOR_ENV] = np.array(act(actions, space), copy=True)
        else:
            rows_of = unbatch(actions)
            out[Columns.ACTIONS_FOR_ENV] = batch_fn([act(row, space) for row in rows_of])
    return out


def _to_numpy(batch: dict[str, Any]) -> dict[str, Any]:
    """RLlib's convert_to_numpy of a flat dict of torch tensors (each to numpy on the
    CPU, floats as float32, int64 as int32), without its tree walk; anything else through
    convert_to_numpy itself."""
    if not all(isinstance(v, torch.Tensor) and v.dim() > 0 for v in batch.values()):
        return convert_to_numpy(batch)
    out = {}
    for column, tensor in batch.items():
        value = tensor.detach().cpu().numpy()
        to = _reduced_type(value.dtype)
        out[column] = value if to is None else value.astype(to)
    return out


@functools.cache
def _reduced_type(dtype: np.dtype) -> type | None:
    """What convert_to_numpy casts an array of `dtype` to: float32 for any float, int32
    for Python's int (int64 here), None for anything else."""
    if np.issubdtype(dtype, np.floating):
        return np.float32
    if np.issubdtype(dtype, int):
        return np.int32
    return None


def lean_to_module(
    runner: Any,
    observations: np.ndarray,
    episodes: list[Any],
    explore: Any,
    shared_data: dict[str, Any],
) -> Any:
    """The default env-to-module pipeline's output from the env's batched observations
    (each episode's last observation, as the pipeline reads them back from the episodes):
    RLlib's NumpyToTensor piece on them (on a machine without CUDA, what it computes).

    Args:
        runner: The env runner.
        observations: The observations the env returned, one row per env.
        episodes: The ongoing episodes, one per env.
        explore: Whether the module explores.
        shared_data: Data the two pipelines share within one step.

    Returns:
        {"obs": tensor}, as RLlib's pipeline gives it.
    """
    if observations.dtype.kind == "f" and not torch.cuda.is_available():
        # the piece's convert_to_torch_tensor on a CPU-only machine: the array as a
        # tensor, floats other than float16 as float32, on the CPU
        tensor = torch.from_numpy(observations)
        return {Columns.OBS: tensor if tensor.dtype == torch.float16 else tensor.float()}
    to_module, _ = env_runner_pipelines(runner)
    return to_module.connectors[-1](
        rl_module=runner.module,
        batch={Columns.OBS: observations},
        episodes=episodes,
        explore=explore,
        shared_data=shared_data,
    )


def _lean_categorical_actions(rl_module: Any, batch: dict[str, Any], explore: Any) -> bool:
    """RLlib's GetActions piece for an exploring module over RLlib's own Categorical:
    the same draw and log-probability, without the distribution object; False (and
    nothing done) where GetActions must run."""
    if not explore or Columns.ACTIONS in batch or Columns.ACTION_DIST_INPUTS not in batch:
        return False
    if not categorical.is_categorical(rl_module.get_exploration_action_dist_cls()):
        return False
    norm = categorical.normalized(batch[Columns.ACTION_DIST_INPUTS])
    actions = categorical.sample(norm)
    batch[Columns.ACTIONS] = actions
    if Columns.ACTION_LOGP not in batch:
        batch[Columns.ACTION_LOGP] = categorical.logp(norm, actions)
    return True


def install(runner: Any) -> str:
    """Gives an env runner the lean pipelines where they do what RLlib's do.

    Args:
        runner: An env runner, in its own process (EnvRunnerGroup.foreach_env_runner).

    Returns:
        "lean", or "rllib (<why>)".
    """
    why = why_not(runner)
    if why is not None:
        return f"rllib ({why})"
    to_module, to_env = env_runner_pipelines(runner)
    # the same pipeline objects (their pieces, state and checkpoints), called leanly
    to_module.__class__ = LeanEnvToModule
    to_env.__class__ = LeanModuleToEnv
    lean_mode_switches(runner.module)  # eval() before each step: once, not every step
    # an env runner's module only ever runs in eval mode (RLlib's forward_exploration
    # and forward_inference switch to it): left there, they switch nothing, where from
    # train mode each step walked the module twice, to eval and back
    runner.module.eval()
    install_lean_exploration(runner.module)  # RLlib's DQN module: its pass, leanly
    if os.environ.get(LEAN_LOOP_SWITCH, "1") != "0":
        install_lean_loop(runner, lean_to_env, lean_to_module)
    return "lean"
