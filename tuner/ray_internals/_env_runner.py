"""RLlib's env runners' private names: sampling as DQN's own training step samples, an
env runner's connector pipelines and weights, an RLModule's exploration pass."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# The sha256 of DefaultDQNTorchRLModule._forward_exploration's source in the Ray whose
# actions rllib/_lean_exploration.py computes (2.60): a Ray whose pass changed fails its
# test until it is checked again.
DQN_EXPLORATION_SOURCE = "0a0d7d7e7b81463b4788e531c7325fac39b434af5b667dea8f47836daa235a80"


def sample_env_runners(algo: Any) -> tuple[Any, Any]:
    """(episodes, env runner metrics) of one synchronous sample of every env runner, as
    DQN's training step samples."""
    from ray.rllib.execution.rollout_ops import synchronous_parallel_sample

    return synchronous_parallel_sample(
        worker_set=algo.env_runner_group,
        concat=True,
        sample_timeout_s=algo.config.sample_timeout_s,
        _uses_new_env_runners=True,
        _return_metrics=True,
    )


def env_runner_pipelines(runner: Any) -> tuple[Any, Any]:
    """An env runner's env-to-module and module-to-env connector pipelines.

    Args:
        runner: A SingleAgentEnvRunner.

    Returns:
        (env-to-module pipeline, module-to-env pipeline).
    """
    return runner._env_to_module, runner._module_to_env


def sync_local_weights(algo: Any) -> bool:
    """The weights of a local Learner's one module copied, tensor by tensor, into the
    local env runner's module: what EnvRunnerGroup.sync_weights(inference_only=True)
    leaves there (the same values, the same weights_seq_no, no copy where nothing was
    trained since), without its trip through numpy and the object store (ray.put with no
    remote runner to read it). Where it does not fit (remote env runners or Learners,
    several modules, a state the env runner's module names differently) nothing is
    copied and the caller syncs through RLlib.

    Args:
        algo: The Algorithm.

    Returns:
        Whether it synced them.
    """
    import torch

    group, learners = algo.env_runner_group, algo.learner_group
    runner = group.local_env_runner
    if runner is None or group.num_remote_workers() or not learners.is_local:
        return False
    learner = learners._learner
    if len(learner.module.keys()) != 1 or not isinstance(runner.module, torch.nn.Module):
        return False
    (module_id,) = learner.module.keys()
    source = learner.module[module_id].state_dict(keep_vars=True)
    target = runner.module.state_dict(keep_vars=True)
    if not target.keys() <= source.keys():
        return False
    seq = learner._weights_seq_no
    if seq == 0 or runner._weights_seq_no < seq:  # as the env runner's set_state decides
        with torch.no_grad():
            for name, tensor in target.items():
                tensor.copy_(source[name])
    if seq > 0:
        runner._weights_seq_no = seq
    return True


def override_exploration(module: Any, exploration: Callable[..., Any]) -> None:
    """Gives one RLModule instance its own exploration pass: RLlib's forward_exploration
    calls `exploration(module, batch, **kwargs)` in place of the class's
    `_forward_exploration` (a partial, not a bound method: the module still pickles, and
    a deepcopy's pass computes on the copy).

    Args:
        module: The RLModule.
        exploration: The pass, taking the module first.
    """
    import functools

    module._forward_exploration = functools.partial(exploration, module)
