"""A spec's multi_agent section as RLlib settings: one RLModule per policy, agents mapped
by the spec's data (a module-level function bound with functools.partial, so it pickles
by reference), a multi-agent replay buffer; and the section read back from a config."""

from __future__ import annotations

import functools
from typing import Any

from ray.rllib.algorithms.algorithm_config import AlgorithmConfig

from tuner.spec import MultiAgentSpec

# RLlib's single-agent episode replay buffers and their multi-agent counterparts: a
# multi-agent DQN/SAC needs the latter (the former cannot hold MultiAgentEpisodes).
MULTI_AGENT_BUFFERS = {
    "EpisodeReplayBuffer": "MultiAgentEpisodeReplayBuffer",
    "PrioritizedEpisodeReplayBuffer": "MultiAgentPrioritizedEpisodeReplayBuffer",
}


def map_agent(
    mapping: tuple[tuple[str, str], ...], default: str, agent_id: Any, *_: Any, **__: Any
) -> str:
    """RLlib's policy_mapping_fn of a spec's multi_agent section, bound with
    functools.partial (module-level, so it pickles by reference into every env runner):
    the policy of str(agent_id) in `mapping`, else `default`."""
    return dict(mapping).get(str(agent_id), default)


def policy_mapping_fn(multi_agent: MultiAgentSpec) -> functools.partial[str]:
    """The policy_mapping_fn RLlib calls as fn(agent_id, episode, **kwargs), built from
    the spec's data: listed agents, then '*', then the first policy."""
    default = multi_agent.policy_mapping.get("*", multi_agent.policies[0])
    listed = tuple(sorted((a, p) for a, p in multi_agent.policy_mapping.items() if a != "*"))
    return functools.partial(map_agent, listed, default)


def multi_agent_of(config: AlgorithmConfig) -> MultiAgentSpec | None:
    """The multi_agent section a config was built from (None: single-agent), read back
    from its policies and the policy_mapping_fn that policy_mapping_fn() made."""
    if not config.is_multi_agent:
        return None
    fn = config.policy_mapping_fn
    mapping: dict[str, str] = {}
    if isinstance(fn, functools.partial) and fn.func is map_agent:
        listed, default = fn.args
        mapping = {**dict(listed), "*": default}
    return MultiAgentSpec(policies=list(config.policies), policy_mapping=mapping)


def apply_multi_agent(config: AlgorithmConfig, multi_agent: MultiAgentSpec) -> None:
    """One RLModule per policy (RLlib's default module of the algorithm, with the
    config's model_config, so `model` and searched `model.<key>` values reach each),
    agents mapped by the spec's policy_mapping, and a multi-agent replay buffer."""
    from ray.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    config.multi_agent(
        policies=list(multi_agent.policies), policy_mapping_fn=policy_mapping_fn(multi_agent)
    )
    config.rl_module(
        rl_module_spec=MultiRLModuleSpec(
            rl_module_specs={pid: RLModuleSpec() for pid in multi_agent.policies}
        )
    )
    buffer = getattr(config, "replay_buffer_config", None)
    if isinstance(buffer, dict) and buffer.get("type") in MULTI_AGENT_BUFFERS:
        config.replay_buffer_config = {**buffer, "type": MULTI_AGENT_BUFFERS[buffer["type"]]}
