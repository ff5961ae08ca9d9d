"""A small RLlib MultiAgentEnv for experiments/multiagent-cartpole.yaml: each agent
balances its own CartPole.

    env: "tuner_examples.multiagent:MultiCartPole"
    env_config: {num_agents: 2, pole_lengths: [0.5, 1.0]}
    multi_agent:
      policies: [left, right]
      policy_mapping: {cart_0: left, cart_1: right}
    metric: env_runners/agent_episode_returns_mean/cart_0

The agents are "cart_0", "cart_1", ... (strings, so result keys and MLflow metrics read
`.../agent_episode_returns_mean/cart_0`). Each agent's episode ends when its own pole
falls (or after 500 steps); the env's episode ends when every agent's has. A pole may be
longer than CartPole's 0.5, which makes that cart a different task: the reason to train
one policy per agent rather than one shared policy.

A PettingZoo env comes in the same way, through a factory function that wraps it in
RLlib's wrapper (no tuner code needed; PettingZoo installed where the sweep runs):

    def make_pistonball(env_config):
        from pettingzoo.butterfly import pistonball_v6
        from ray.rllib.env.wrappers.pettingzoo_env import ParallelPettingZooEnv
        return ParallelPettingZooEnv(pistonball_v6.parallel_env(**env_config))
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
from gymnasium.envs.classic_control import CartPoleEnv
from ray.rllib.env.multi_agent_env import MultiAgentEnv

MAX_STEPS = 500


class MultiCartPole(MultiAgentEnv):
    """`num_agents` independent CartPoles (default 2), agent ids "cart_<i>"; optional
    `pole_lengths` (one half-length per agent, CartPole's own is 0.5)."""

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        super().__init__()
        config = dict(config or {})
        num_agents = int(config.get("num_agents", 2))
        if num_agents < 1:
            raise ValueError(f"num_agents must be >= 1, got {num_agents}")
        lengths = list(config.get("pole_lengths") or [0.5] * num_agents)
        if len(lengths) != num_agents:
            raise ValueError(f"pole_lengths needs {num_agents} values, got {len(lengths)}")
        self.possible_agents = [f"cart_{i}" for i in range(num_agents)]
        self.agents = []
        self._envs: dict[str, gym.Env] = {}
        for agent, length in zip(self.possible_agents, lengths, strict=True):
            env = CartPoleEnv()
            env.length = float(length)
            env.polemass_length = env.masspole * env.length
            self._envs[agent] = gym.wrappers.TimeLimit(env, max_episode_steps=MAX_STEPS)
        first = self._envs[self.possible_agents[0]]
        self.observation_spaces = {a: first.observation_space for a in self.possible_agents}
        self.action_spaces = {a: first.action_space for a in self.possible_agents}

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        self.agents = list(self.possible_agents)
        observations, infos = {}, {}
        for i, agent in enumerate(self.agents):
            agent_seed = None if seed is None else seed + i
            observations[agent], infos[agent] = self._envs[agent].reset(seed=agent_seed)
        return observations, infos

    def step(self, action_dict: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        observations, rewards, terminateds, truncateds, infos = {}, {}, {}, {}, {}
        for agent, action in action_dict.items():
            obs, reward, terminated, truncated, info = self._envs[agent].step(action)
            observations[agent], rewards[agent], infos[agent] = obs, reward, info
            terminateds[agent], truncateds[agent] = terminated, truncated
            if terminated or truncated:
                self.agents.remove(agent)
        terminateds["__all__"] = not self.agents
        truncateds["__all__"] = False
        return observations, rewards, terminateds, truncateds, infos

    def close(self) -> None:
        for env in self._envs.values():
            env.close()
