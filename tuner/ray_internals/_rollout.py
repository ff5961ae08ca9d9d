"""A single-agent env runner's timestep loop, for the lean pipelines' case, leanly.

RLlib's `SingleAgentEnvRunner._sample` calls, on every env step, its two connector
pipelines, unbatches the observations and actions into rows, and makes three episode
callbacks per env; each call pays its own dispatch, timers and regrouping. Where the
runner's pipelines are RLlib's defaults of a stateless single-agent module
(tuner/rllib/_lean_sampling.py installs their lean forms), and its callbacks are RLlib's
no-op default, the loop below does the same work in one place: the same forward pass
under the same timer, the same draws (the lean module-to-env piece), the env stepped
through the runner's own `_try_env_step`, the same `add_env_reset` / `add_env_step`
calls on the same episode objects, the next step's module input stacked from the
observations the env returned (what the env-to-module pipeline reads back from the
episodes: each env's last observation), the two length counters logged per step as the
lean pipeline logs them, and the runner's own tail (cut, validate, numpy, counters).
tests/integration/test_lean_sampling.py compares the episodes and the runner's metrics
with RLlib's loop field by field.

Anything else (episodes instead of timesteps, random actions, a spec's callbacks on
episodes) runs RLlib's own `_sample`. SAMPLE_SOURCE pins the RLlib loop this one follows:
a Ray whose loop changed fails tests/unit/test_ray_internals.py until it is checked again.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

# sha256 of SingleAgentEnvRunner._sample's source in the Ray this loop follows (2.60)
SAMPLE_SOURCE = "92e2404f91da8a813eca5c722e2510615adbd5440011b678dcf5df2cfb18e506"
EPISODE_CALLBACKS = ("created", "start", "step", "end")


def quiet_episode_callbacks(runner: Any) -> bool:
    """Whether a runner's episode callbacks do nothing: RLlib's default callbacks object
    only (its on_episode_* methods are no-ops) and no callback functions in the config.

    Args:
        runner: A SingleAgentEnvRunner.

    Returns:
        True where skipping them changes nothing.
    """
    from ray.rllib.callbacks.callbacks import RLlibCallback

    if any(type(c) is not RLlibCallback for c in runner._callbacks):
        return False
    return all(
        getattr(runner.config, f"callbacks_on_episode_{w}") is None for w in EPISODE_CALLBACKS
    )


class LoopHooks(NamedTuple):
    rllib_sample: Any  # the runner's own _sample
    to_env: Any  # the lean module-to-env step
    to_tensor: Any  # the lean env-to-module step


def install_lean_loop(runner: Any, to_env: Any, to_tensor: Any) -> None:
    """Gives one env runner the lean timestep loop (an attribute of this instance).

    Args:
        runner: A SingleAgentEnvRunner whose pipelines are the lean ones.
        to_env: `(pipeline, rl_module, batch, episodes, explore, shared_data) -> dict`:
            the module-to-env step, actions batched, each other column one row per env.
        to_tensor: `(runner, observations, episodes, explore, shared_data) -> module
            input`: the env-to-module step from the env's batched observations.
    """
    hooks = LoopHooks(runner._sample, to_env, to_tensor)
    runner._sample = functools.partial(lean_sample, runner, hooks)


def lean_sample(
    runner: Any,
    hooks: LoopHooks,
    *,
    num_timesteps: int | None = None,
    num_episodes: int | None = None,
    explore: bool,
    random_actions: bool = False,
    force_reset: bool = False,
) -> list[Any]:
    """`SingleAgentEnvRunner._sample`, leanly where it can be (see the module)."""
    if num_timesteps is None or random_actions or runner.module is None:
        return hooks.rllib_sample(
            num_timesteps=num_timesteps,
            num_episodes=num_episodes,
            explore=explore,
            random_actions=random_actions,
            force_reset=force_reset,
        )
    import numpy as np
    from ray.rllib.core.columns import Columns
    from ray.rllib.env.env_runner import ENV_STEP_FAILURE
    from ray.rllib.utils.metrics import (
        ENV_TO_MODULE_SUM_EPISODES_LENGTH_IN,
        ENV_TO_MODULE_SUM_EPISODES_LENGTH_OUT,
        RLMODULE_INFERENCE_TIMER,
        WEIGHTS_SEQ_NO,
    )

    quiet = quiet_episode_callbacks(runner)
    if force_reset or runner._needs_initial_reset:
        runner._reset_envs_and_episodes(explore)
    module, metrics = runner.module, runner.metrics
    runners = runner.config.num_env_runners or 1
    ts = 0
    done: list[Any] = []
    while ts < num_timesteps:
        to_module = runner._cached_to_module
        runner._cached_to_module = None
        with metrics.log_time(RLMODULE_INFERENCE_TIMER):
            if explore:
                t = (runner.num_env_steps_sampled_lifetime // runners + ts) * runners
                out = module.forward_exploration(to_module, t=t)
            else:
                out = module.forward_inference(to_module)
        episodes, shared = runner._ongoing_episodes, runner._shared_data
        to_env = hooks.to_env(runner._module_to_env, module, out, episodes, explore, shared)
        actions = to_env.pop(Columns.ACTIONS)
        results = runner._try_env_step(to_env.pop(Columns.ACTIONS_FOR_ENV, actions))
        if results == ENV_STEP_FAILURE:  # as RLlib's loop: reset, count from zero again
            ts = 0
            runner._reset_envs_and_episodes(explore)
            continue
        observations = results[0]
        started, stepped = record_step(runner, results, actions, to_env, WEIGHTS_SEQ_NO)
        ts += stepped
        # the next step's input: each episode's last observation, which is the env's
        length = sum(map(len, episodes))
        metrics.log_value(ENV_TO_MODULE_SUM_EPISODES_LENGTH_IN, length)
        shared["memorized_map_structure"] = [e.id_ for e in episodes]
        runner._cached_to_module = hooks.to_tensor(
            runner, np.array(observations), episodes, explore, shared
        )
        metrics.log_value(ENV_TO_MODULE_SUM_EPISODES_LENGTH_OUT, length)
        for i, episode in enumerate(episodes):
            if not quiet:
                which = "on_episode_start" if i in started else "on_episode_step"
                runner._make_on_episode_callback(which, i, episodes)
            if episode.is_done:
                if not quiet:
                    runner._make_on_episode_callback("on_episode_end", i, episodes)
                done.append(episode.to_numpy() if runner.episodes_to_numpy else episode)
                runner._new_episode(i, episodes)
    return finish_sample(runner, ts, done)


def record_step(
    runner: Any, results: tuple[Any, ...], actions: Any, to_env: dict[str, Any], seq_key: str
) -> tuple[set[int], int]:
    """One env step into the ongoing episodes, as RLlib's loop adds it: a reset where an
    episode has none yet, else the step with the module's outputs. Returns the envs
    whose episodes started, and how many env steps were taken (resets do not count);
    `seq_key` is RLlib's WEIGHTS_SEQ_NO (imported once a sample, not once a step)."""
    observations, rewards, terminateds, truncateds, infos = results
    seq_no = runner._weights_seq_no
    started, stepped = set(), 0
    for i, episode in enumerate(runner._ongoing_episodes):
        if not episode.is_reset:
            episode.add_env_reset(observation=observations[i], infos=infos[i])
            started.add(i)
            continue
        stepped += 1
        extra = {k: v[i] for k, v in to_env.items()}
        extra[seq_key] = seq_no
        episode.add_env_step(
            observation=observations[i],
            action=actions[i],
            reward=rewards[i],
            infos=infos[i],
            terminated=terminateds[i],
            truncated=truncateds[i],
            extra_model_outputs=extra,
        )
    return started, stepped


def finish_sample(runner: Any, ts: int, done: list[Any]) -> list[Any]:
    """The end of RLlib's timestep loop: done episodes kept for the metrics, ongoing ones
    cut (their continuations carry on), validated and returned; the step counters."""
    runner._done_episodes_for_metrics.extend(done)
    ongoing = runner._ongoing_episodes
    horizon = runner.config.episode_lookback_horizon
    continuations = [e.cut(len_lookback_buffer=horizon) for e in ongoing]
    chunks = []
    for episode in ongoing:
        if episode.t == 0:  # just created, nothing in it
            continue
        episode.validate()
        runner._ongoing_episodes_for_metrics[episode.id_].append(episode)
        chunks.append(episode.to_numpy() if runner.episodes_to_numpy else episode)
    runner._ongoing_episodes = continuations
    runner._log_env_steps(metric=runner._metrics_num_env_steps_sampled, num_steps=ts)
    runner._increase_sampled_metrics(ts, len(done))
    return done + chunks
