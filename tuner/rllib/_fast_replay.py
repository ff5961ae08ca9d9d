"""A flat replay path for DQN and SAC trials: the same replay as RLlib's episode buffers,
without their per-sample episode objects.

RLlib 2.60's episode replay buffers store episodes and, for every sampled transition,
slice its episode into a new `SingleAgentEpisode`, which the learner connector pipeline
then turns back into a batch: for a batch of 256 that is most of an update's time on a
small network (docs/benchmarks-history.md, the flat replay path). This module keeps one-
step transitions in numpy arrays instead (_transitions.py) and hands the learner the
batch itself (`learner_group.update(batch=...)`, which skips the learner connector): the
columns the connector builds (obs, new_obs, actions, rewards, terminateds, truncateds,
n_step, weights), sampled as RLlib's `EpisodeReplayBuffer` (uniform) or
`PrioritizedEpisodeReplayBuffer` samples, n-step included, with the same sample / store
/ update rhythm as RLlib's own training step (`calculate_rr_weights`,
`num_steps_sampled_before_learning_starts`, the target-network timesteps, priority
updates after each update, weight sync). One difference, on purpose: the updates are
counted from the env steps each round really sampled (`UpdateDebt`), so vectorised envs
keep the update ratio exact where RLlib's own step drifts below it.

It runs only where it is the same algorithm (`eligible`): single-agent, a stateless
module, one of those two buffers, the default connectors, no replay buffer in
checkpoints, Box observations of at most `MAX_OBS_SIZE` numbers and Box or Discrete
actions. Everything else keeps RLlib's path. `TUNER_FAST_REPLAY=0` in the trial's
environment keeps RLlib's path too (for A/B measurements).
"""

from __future__ import annotations

import functools
import os
from typing import Any

import numpy as np

from tuner.ray_internals import (
    has_own_connectors,
    module_is_stateful,
    sample_env_runners,
    sync_local_weights,
    update_unreduced,
)
from tuner.rllib._transitions import TransitionBuffer

SWITCH = "TUNER_FAST_REPLAY"
MAX_OBS_SIZE = 4096  # numbers per observation: larger ones (images) keep RLlib's buffer


@functools.lru_cache(maxsize=64)
def gym_env_fits(env_id: str) -> bool:
    """Whether an id in gymnasium's registry (no import path, no namespace such as ALE/)
    makes an env whose spaces the flat path takes: made once per process, as `tuner
    validate` makes it. False for anything it cannot make or tell."""
    if ":" in env_id or "/" in env_id:
        return False
    import gymnasium

    if env_id not in gymnasium.registry:
        return False
    try:
        env = gymnasium.make(env_id)
    except Exception:  # noqa: BLE001 - an id gymnasium cannot make: not known to fit
        return False
    try:
        return _obs_fits(env.observation_space) and _actions_fit(env.action_space)
    finally:
        env.close()


def _obs_fits(space: Any) -> bool:
    from gymnasium.spaces import Box

    return isinstance(space, Box) and int(np.prod(space.shape)) <= MAX_OBS_SIZE


def _actions_fit(space: Any) -> bool:
    from gymnasium.spaces import Box, Discrete

    return isinstance(space, Box | Discrete)


def _buffer_kind(config: Any) -> str | None:
    """ "uniform" / "prioritized" for RLlib's own two episode buffers (by short name or
    class), else None."""
    from ray.rllib.utils.replay_buffers.episode_replay_buffer import EpisodeReplayBuffer
    from ray.rllib.utils.replay_buffers.prioritized_episode_buffer import (
        PrioritizedEpisodeReplayBuffer,
    )

    kinds = {EpisodeReplayBuffer: "uniform", PrioritizedEpisodeReplayBuffer: "prioritized"}
    kind = (config.replay_buffer_config or {}).get("type")
    if isinstance(kind, str):
        return next((v for k, v in kinds.items() if k.__name__ == kind.rsplit(".", 1)[-1]), None)
    return kinds.get(kind)


def buffer_for(config: Any) -> TransitionBuffer:
    """The flat buffer for an eligible trial: its capacity, its kind (alpha for the
    prioritized one, RLlib's default 1.0 where the config gives none) and its seed."""
    buffer = config.replay_buffer_config or {}
    alpha = None
    if _buffer_kind(config) == "prioritized":
        alpha = float(buffer.get("alpha", 1.0))
    return TransitionBuffer(int(buffer.get("capacity", 10_000)), config.seed, alpha=alpha)


def _spaces(algo: Any) -> tuple[Any, Any]:
    """The module's observation and action spaces, from the local env runner or the
    first remote one."""
    if algo.env_runner is not None:
        module = algo.env_runner.module
        return module.observation_space, module.action_space
    return algo.env_runner_group.foreach_env_runner(
        lambda runner: (runner.module.observation_space, runner.module.action_space),
        remote_worker_ids=[1],
        local_env_runner=False,
    )[0]


def eligible(algo: Any) -> str | None:
    """None when a DQN / SAC trial can take the flat path, else why not (for the log
    and the trial's result)."""
    config = algo.config
    if os.environ.get(SWITCH, "1") == "0":
        return f"{SWITCH}=0"
    reasons = {
        "multi-agent": config.is_multi_agent,
        "recurrent module": module_is_stateful(algo),
        "not one of RLlib's episode replay buffers": _buffer_kind(config) is None,
        "replay buffer stored in checkpoints": bool(config.get("store_buffer_in_checkpoints")),
        "own connectors": has_own_connectors(config)
        or not config.add_default_connectors_to_learner_pipeline,
        "steps counted by agent": config.count_steps_by != "env_steps",
        "complete episodes per round": config.batch_mode != "truncate_episodes",
    }
    found = [why for why, yes in reasons.items() if yes]
    if found:
        return ", ".join(found)
    obs_space, action_space = _spaces(algo)
    if not _obs_fits(obs_space):
        return f"observations {obs_space} (flat Box of <= {MAX_OBS_SIZE} numbers only)"
    if not _actions_fit(action_space):
        return f"actions {action_space} (Box or Discrete only)"
    return None


class UpdateDebt:
    """How many updates the env steps sampled so far call for, at `train_weight` updates
    per `steps_per_round` env steps (debt_for: the config's training_intensity, else
    RLlib's round robin, dqn.py calculate_rr_weights). RLlib runs its updates per round
    whatever the round sampled; vectorised envs sample up to `num_envs - 1` steps more where an
    episode resets in the round (a reset is not a step, sample() stops at the first
    vector step past the fragment), which would lower the update ratio. Counting from
    the steps actually sampled keeps it exact; integer arithmetic, so nothing drifts."""

    def __init__(self, train_weight: int, steps_per_round: int) -> None:
        if train_weight < 1 or steps_per_round < 1:
            raise ValueError(f"bad update rate {train_weight} per {steps_per_round} steps")
        self.train_weight = int(train_weight)
        self.steps_per_round = int(steps_per_round)
        self._owed = 0  # in units of 1 / steps_per_round updates

    def owe(self, env_steps: int) -> int:
        """The whole updates `env_steps` more sampled env steps call for (the fraction
        left over carries to the next call)."""
        self._owed += int(env_steps) * self.train_weight
        whole, self._owed = divmod(self._owed, self.steps_per_round)
        return whole


def debt_for(config: Any) -> UpdateDebt:
    """The update rate of a DQN/SAC config: RLlib's round robin (dqn.py
    calculate_rr_weights: training_intensity over its native ratio, updates per round of
    `rollout_fragment_length x num_envs_per_env_runner` env steps per env runner), without
    its rounding to whole updates per round (the same wherever that divides evenly, as
    RLlib's own defaults and held ratios do); one update per round without an intensity."""
    from fractions import Fraction

    per_runner = config.get_rollout_fragment_length() * config.num_envs_per_env_runner
    per_round = per_runner * max(config.num_env_runners, 1)
    if not config.training_intensity:
        return UpdateDebt(1, per_round)
    # RLlib's native ratio counts the local env runner too (env runners + 1)
    native = Fraction(config.total_train_batch_size, per_runner * (config.num_env_runners + 1))
    intensity = Fraction(config.training_intensity).limit_denominator(10**6)
    rate = intensity / native / per_round  # updates per env step
    return UpdateDebt(rate.numerator, rate.denominator)


# True: reduce the learner's metrics after every update, as RLlib's own step does (the
# A/B reference of tests/integration/test_fast_replay.py); the updates are the same.
REDUCE_EACH_UPDATE = False
# True: a local CPU Learner gets its batch as torch tensors, as RLlib's Learner would
# convert it (floats to float32), instead of numpy for RLlib to convert per update.
TENSOR_BATCHES = True
# True: a local Learner's weights are copied into the local env runner in place after
# each round (ray_internals.sync_local_weights), not through numpy and the object store.
LEAN_WEIGHT_SYNC = True


def reduce_per_iteration(config: Any) -> bool:
    """Whether a uniform buffer's learner metrics may wait for the iteration's end (one
    reduce per iteration, `end_iteration`): nothing in RLlib's iteration loop reads them
    before, unless `min_train_timesteps_per_iteration` asks it to count trained steps;
    and the Learner is a lean one (_lean_metrics), which reports each loss stat's mean
    over the updates, as RLlib's reduce after each update does (another Learner's
    window=1 stats would keep only the last update's).

    Args:
        config: The trial's AlgorithmConfig.

    Returns:
        True where they may wait.
    """
    lean = hasattr(config.learner_class, "tuner_flush_update_metrics")
    return lean and not REDUCE_EACH_UPDATE and not config.min_train_timesteps_per_iteration


def _tensor_batches(config: Any) -> bool:
    """Whether the Learner is local and on the CPU (no Learner actors, no GPU)."""
    return TENSOR_BATCHES and config.num_learners == 0 and not config.num_gpus_per_learner


def _as_tensors(columns: dict[str, np.ndarray]) -> dict[str, Any]:
    """The columns as RLlib's Learner converts a numpy batch on the CPU
    (convert_to_torch_tensor): the same memory, floating point as float32."""
    import torch

    out = {}
    for name, array in columns.items():
        tensor = torch.from_numpy(array)
        if tensor.is_floating_point() and tensor.dtype != torch.float16:
            tensor = tensor.float()
        out[name] = tensor
    return out


def drop_td_errors(learner: Any) -> bool:
    """Has a lean Learner (_lean_metrics) drop the per-sample TD errors its updates log:
    a uniform buffer never reads them (they would be kept all iteration, then popped).

    Args:
        learner: A Learner, built.

    Returns:
        True if it is a lean one and drops them.
    """
    from ray.rllib.algorithms.dqn.dqn import TD_ERROR_KEY

    drop = getattr(learner, "tuner_drop_stats", None)
    if drop is None:
        return False
    drop({TD_ERROR_KEY})
    return True


def _reduce_learner(learner: Any) -> Any:
    """A Learner's metrics reduced (a lean Learner's kept loss metrics logged first)."""
    flush = getattr(learner, "tuner_flush_update_metrics", None)
    if flush is not None:
        flush()
    return learner.metrics.reduce()


def _aggregate_learner_results(algo: Any, results: list[dict[str, Any]]) -> list[Any]:
    """Takes the per-sample TD errors out of the learners' reduced results (new
    priorities, never logged, as RLlib's own step) and aggregates the rest into the
    algorithm's metrics. Returns the TD errors, for a prioritized buffer."""
    from ray.rllib.algorithms.dqn.dqn import TD_ERROR_KEY
    from ray.rllib.utils.metrics import LEARNER_RESULTS

    popped = [
        stats
        for result in results
        for module_results in result.values()
        if (stats := module_results.pop(TD_ERROR_KEY, None)) is not None
    ]
    algo.metrics.aggregate(results, key=LEARNER_RESULTS)
    return popped


def end_iteration(algo: Any) -> bool:
    """Reduces the learner metrics a uniform buffer's rounds left unreduced this
    iteration into the algorithm's (before RLlib compiles the iteration's results).

    Args:
        algo: The trial's Algorithm, on the flat path.

    Returns:
        True if there was something to reduce.
    """
    from ray.rllib.utils.metrics import LEARNER_UPDATE_TIMER, TIMERS

    if not getattr(algo, "_tuner_unreduced", False):
        return False
    algo._tuner_unreduced = False
    with algo.metrics.log_time((TIMERS, LEARNER_UPDATE_TIMER)):
        calls = algo.learner_group.foreach_learner(_reduce_learner)
        _aggregate_learner_results(algo, [call.get() for call in calls])
    return True


def training_step(algo: Any, buffer: TransitionBuffer, debt: UpdateDebt) -> None:
    """RLlib 2.60's DQN/SAC training step (DQN._training_step_new_api_stack) on the flat
    buffer: sample `store_weight` times and store; once enough env steps are sampled,
    the updates those steps call for (`debt`: `train_weight` per round where a round
    samples what RLlib plans), each on a fresh batch of `total_train_batch_size`; then
    the env runners get the new weights."""
    from ray.rllib.algorithms.dqn.dqn import calculate_rr_weights
    from ray.rllib.core import DEFAULT_MODULE_ID
    from ray.rllib.policy.sample_batch import MultiAgentBatch, SampleBatch
    from ray.rllib.utils.metrics import (
        ENV_RUNNER_RESULTS,
        ENV_RUNNER_SAMPLING_TIMER,
        LEARNER_UPDATE_TIMER,
        NUM_AGENT_STEPS_SAMPLED_LIFETIME,
        NUM_ENV_STEPS_SAMPLED_LIFETIME,
        REPLAY_BUFFER_ADD_DATA_TIMER,
        REPLAY_BUFFER_RESULTS,
        REPLAY_BUFFER_SAMPLE_TIMER,
        REPLAY_BUFFER_UPDATE_PRIOS_TIMER,
        SYNCH_WORKER_WEIGHTS_TIMER,
        TIMERS,
    )

    config = algo.config
    metrics = algo.metrics
    store_weight, _ = calculate_rr_weights(config)
    added = 0
    for _ in range(store_weight):
        with metrics.log_time((TIMERS, ENV_RUNNER_SAMPLING_TIMER)):
            episodes, env_runner_results = sample_env_runners(algo)
        metrics.aggregate(env_runner_results, key=ENV_RUNNER_RESULTS)
        with metrics.log_time((TIMERS, REPLAY_BUFFER_ADD_DATA_TIMER)):
            added += buffer.add(episodes)
    metrics.log_value((REPLAY_BUFFER_RESULTS, "num_transitions"), len(buffer), window=1)
    metrics.log_value(
        (REPLAY_BUFFER_RESULTS, "num_transitions_added_lifetime"), buffer.added, window=1
    )

    sampled = metrics.peek((ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME), default=0)
    if sampled < config.num_steps_sampled_before_learning_starts or len(buffer) == 0:
        return
    updates = debt.owe(added)
    timesteps = {
        NUM_ENV_STEPS_SAMPLED_LIFETIME: sampled,
        NUM_AGENT_STEPS_SAMPLED_LIFETIME: metrics.peek(
            (ENV_RUNNER_RESULTS, NUM_AGENT_STEPS_SAMPLED_LIFETIME), default={}
        ),
    }
    size = config.total_train_batch_size
    beta = float((config.replay_buffer_config or {}).get("beta") or 0.0)
    n_step = tuple(config.n_step) if isinstance(config.n_step, list | tuple) else config.n_step
    results: list[dict[str, Any]] = []
    # A uniform buffer needs no TD errors between updates: a lean Learner's metrics are
    # reduced once per iteration (`end_iteration`) instead of after each update (RLlib
    # reduces every logged stat per call: a quarter of a small update's time). Where they
    # may not wait, each update reduces, as RLlib's own step does (the algorithm averages
    # every update's window=1 stats with equal weight). The updates, their batches and
    # the target-network checks after each are the same either way.
    uniform = buffer.alpha is None
    later = uniform and reduce_per_iteration(config)
    tensors = _tensor_batches(config)
    for _ in range(updates):
        reduce_now = not later
        with metrics.log_time((TIMERS, REPLAY_BUFFER_SAMPLE_TIMER)):
            columns = buffer.sample(size, beta=beta, n_step=n_step, gamma=config.gamma)
            batch = MultiAgentBatch(
                {DEFAULT_MODULE_ID: SampleBatch(_as_tensors(columns) if tensors else columns)},
                env_steps=size,
            )
        with metrics.log_time((TIMERS, LEARNER_UPDATE_TIMER)):
            if not reduce_now:
                update_unreduced(algo.learner_group, batch, timesteps)
                algo._tuner_unreduced = True
                continue
            results = algo.learner_group.update(batch=batch, timesteps=timesteps)
            # a uniform buffer drops the TD errors unread (to numpy: 6 % of a SAC trial)
            popped = _aggregate_learner_results(algo, results)
            td_errors = [_flat(s.peek()) for s in popped] if buffer.alpha is not None else []
        if buffer.alpha is not None and td_errors:
            with metrics.log_time((TIMERS, REPLAY_BUFFER_UPDATE_PRIOS_TIMER)):
                buffer.update_priorities(np.concatenate(td_errors))

    from ray.rllib.core import ALL_MODULES

    with metrics.log_time((TIMERS, SYNCH_WORKER_WEIGHTS_TIMER)):
        if LEAN_WEIGHT_SYNC and sync_local_weights(algo):
            return
        algo.env_runner_group.sync_weights(
            from_worker_or_learner_group=algo.learner_group,
            policies=set(results[0].keys()) - {ALL_MODULES} if results else None,
            global_vars=None,
            inference_only=True,
        )


def _flat(value: Any) -> np.ndarray:
    """TD errors as one array: a tensor, or the list of them RLlib's "item_series"
    metric holds (one per Learner shard)."""
    from ray.rllib.utils.numpy import convert_to_numpy

    value = convert_to_numpy(value)
    if isinstance(value, list | tuple):
        return np.concatenate([np.reshape(v, -1) for v in value]) if value else np.zeros(0)
    return np.reshape(value, -1)
