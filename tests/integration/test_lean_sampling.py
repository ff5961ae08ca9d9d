"""The lean sampling path (tuner/rllib/_lean_sampling.py, its timestep loop in
tuner/ray_internals/_rollout.py): an env runner with the lean connector pipelines and
loop fills the very same episodes as RLlib's own pipelines and loop (observations,
actions, rewards, ends, every extra model output, to the bit, exploring and not) and
reports the same metrics; a spec's episode callbacks are called as RLlib calls them;
sampling by episodes takes RLlib's loop; a runner it does not cover keeps RLlib's; a
trial reports which path its runners took."""

from __future__ import annotations

import numpy as np
import pytest
from ray.rllib.algorithms.dqn import DQNConfig
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.algorithms.sac import SACConfig
from ray.rllib.connectors.env_to_module import FlattenObservations
from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner

from tests.conftest import TINY_TRIALS
from tuner.ray_internals import env_runner_pipelines
from tuner.rllib import trainable_for
from tuner.rllib._lean_sampling import install, why_not
from tuner.spec import parse_spec
from tuner.sweep import trial_params

pytestmark = pytest.mark.integration


def _runner(config, env: str, envs: int, lean: bool) -> SingleAgentEnvRunner:
    config = (
        config.environment(env)
        .env_runners(num_env_runners=0, num_envs_per_env_runner=envs)
        .debugging(seed=3)
    )
    runner = SingleAgentEnvRunner(config=config)
    if lean:
        assert install(runner) == "lean"
    return runner


# metrics that measure time, not what was sampled (RLlib's pipelines also time each of
# their pieces, which the lean ones skip); "sample" is the sample call's timer
TIMED = ("time", "duration")


def _counted(metrics: dict, prefix: str = "") -> dict:
    """A runner's reduced metrics but those that time, flattened to their values."""
    out = {}
    for key, value in metrics.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_counted(value, f"{path}/"))
        elif path != "sample" and not any(word in path for word in TIMED):
            out[path] = value.peek()
    return out


@pytest.fixture
def lean_steps(monkeypatch) -> list[int]:
    """One entry per env step the lean timestep loop recorded."""
    from tuner.ray_internals import _rollout

    steps: list[int] = []
    real = _rollout.record_step
    monkeypatch.setattr(_rollout, "record_step", lambda *a, **k: steps.append(1) or real(*a, **k))
    return steps


def _fields(episode) -> dict:
    return {
        "obs": np.asarray(episode.get_observations()),
        "actions": np.asarray(episode.get_actions()),
        "rewards": np.asarray(episode.get_rewards()),
        "ends": np.asarray([episode.is_terminated, episode.is_truncated]),
        **{
            f"extra/{key}": np.asarray(episode.get_extra_model_outputs(key))
            for key in episode.extra_model_outputs
        },
    }


@pytest.mark.parametrize(
    ("config", "env", "envs"),
    [
        (DQNConfig, "CartPole-v1", 4),
        (SACConfig, "Pendulum-v1", 1),
        (SACConfig, "Pendulum-v1", 3),  # Box actions unsquashed for several envs at once
        (PPOConfig, "CartPole-v1", 3),
        (PPOConfig, "Pendulum-v1", 3),
    ],
    ids=["DQN-4-envs", "SAC-1-env", "SAC-3-envs", "PPO-3-envs", "PPO-Box-3-envs"],
)
def test_the_lean_pipelines_fill_the_same_episodes_as_rllibs(
    monkeypatch, lean_steps, config, env, envs
):
    """DQN's exploration pass is the lean one on the lean runner (its draws the same);
    every step of both samples went through the lean loop."""
    from tuner.rllib import _lean_exploration

    passes = []
    real = _lean_exploration.lean_dqn_exploration
    monkeypatch.setattr(
        _lean_exploration,
        "lean_dqn_exploration",
        lambda *a, **k: passes.append(1) or real(*a, **k),
    )
    sampled, metrics = {}, {}
    for lean in (False, True):
        runner = _runner(config(), env, envs, lean)
        try:
            episodes = runner.sample(num_timesteps=600, explore=True)
            episodes += runner.sample(num_timesteps=200, explore=False)
            sampled[lean] = [_fields(e) for e in episodes]
            metrics[lean] = _counted(runner.get_metrics())
            # the lean runner's module stays in eval mode: no switch back and forth a step
            training = {m.training for m in runner.module.modules()}
            assert training == ({False} if lean else {True})
        finally:
            runner.stop()
    assert len(sampled[True]) == len(sampled[False]) > envs  # episodes ended and went on
    for rllib, lean in zip(sampled[False], sampled[True], strict=True):
        assert lean.keys() == rllib.keys()
        for key, value in rllib.items():
            assert lean[key].dtype == value.dtype, key
            np.testing.assert_array_equal(lean[key], value, err_msg=key)
    assert metrics[True] == metrics[False]
    assert metrics[True]["episode_return_mean"] is not None
    assert len(lean_steps) >= 800 // envs
    # at least 600 exploring env steps, `envs` a pass (and no pass on RLlib's runner)
    if config is DQNConfig:
        assert len(passes) >= 600 // envs
    else:
        assert passes == []


def test_a_specs_episode_callbacks_are_called_as_rllibs_loop_calls_them(lean_steps):
    from ray.rllib.callbacks.callbacks import RLlibCallback

    calls: list[tuple[str, int, int]] = []

    class Counting(RLlibCallback):
        def on_episode_start(self, *, episode, env_index, **kwargs):
            calls.append(("start", env_index, len(episode)))

        def on_episode_step(self, *, episode, env_index, **kwargs):
            calls.append(("step", env_index, len(episode)))

        def on_episode_end(self, *, episode, env_index, **kwargs):
            calls.append(("end", env_index, len(episode)))

    seen = {}
    for lean in (False, True):
        calls.clear()
        runner = _runner(PPOConfig().callbacks(Counting), "CartPole-v1", 3, lean)
        try:
            runner.sample(num_timesteps=300, explore=True)
        finally:
            runner.stop()
        seen[lean] = list(calls)
    assert seen[True] == seen[False]
    assert {"start", "step", "end"} <= {which for which, _, _ in seen[True]}
    assert len(lean_steps) >= 100


def test_sampling_by_episodes_takes_rllibs_loop(lean_steps):
    sampled = {}
    for lean in (False, True):
        runner = _runner(PPOConfig(), "CartPole-v1", 2, lean)
        try:
            sampled[lean] = [_fields(e) for e in runner.sample(num_episodes=3, explore=True)]
        finally:
            runner.stop()
    assert lean_steps == []
    assert len(sampled[True]) == len(sampled[False]) >= 3
    for rllib, lean in zip(sampled[False], sampled[True], strict=True):
        for key, value in rllib.items():
            np.testing.assert_array_equal(lean[key], value, err_msg=key)


def test_runners_it_does_not_cover_keep_rllibs_pipelines():
    cases = {
        "a stateful (RNN) module": PPOConfig()
        .environment("CartPole-v1")
        .rl_module(model_config={"use_lstm": True}),
        "own env-to-module connectors": PPOConfig()
        .environment("CartPole-v1")
        .env_runners(env_to_module_connector=lambda env, spaces, device: FlattenObservations()),
    }
    for why, config in cases.items():
        runner = SingleAgentEnvRunner(config=config.env_runners(num_env_runners=0))
        try:
            assert why_not(runner) == why
            assert install(runner) == f"rllib ({why})"
            assert not any(
                type(p).__name__.startswith("Lean") for p in env_runner_pipelines(runner)
            )
            assert len(runner.sample(num_timesteps=20, explore=True)) >= 1  # RLlib's own
        finally:
            runner.stop()


@pytest.mark.parametrize("switch", ["1", "0"])
def test_a_trial_reports_its_sampling_path(ray_local, monkeypatch, switch):
    monkeypatch.setenv("TUNER_LEAN_SAMPLING", switch)
    spec = parse_spec({"name": "lean-sampling", "algorithm": "DQN", **TINY_TRIALS["DQN"]})
    algo = trainable_for(spec)(config={**trial_params(spec), "seed": 3})
    try:
        result = algo.train()
    finally:
        algo.stop()
    assert result["num_env_steps_sampled_lifetime"] > 0
    assert result["tuner"].get("sampling") == ("lean" if switch == "1" else None)
