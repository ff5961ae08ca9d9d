"""Environment resolution: gymnasium ids, 'package.module:ClassOrFactory' paths, and
the named wrappers a spec may put around an env (`wrappers: atari`).

An import path names a gymnasium.Env subclass, an RLlib MultiAgentEnv subclass (a
gymnasium.Env too) or a factory function returning either (a PettingZoo env comes in
through a factory that wraps it in RLlib's PettingZooEnv / ParallelPettingZooEnv).

The env is built once in the driver before any trial starts, so a wrong id, an
import error or a constructor exception is a validation error naming the field,
not a failed Ray actor half a minute later; so is a multi-agent env without the
spec's `multi_agent` section (or the other way round) and an agent id the env lacks.

ALE ids ("ALE/Breakout-v5") exist in gymnasium 1.x only once `ale_py` is imported and
`gymnasium.register_envs(ale_py)` has run, and RLlib's env runners call `gym.make`
themselves, in their own processes. So such envs (and every wrapped env) are registered
with Tune's registry (which every worker of the job reads) under a name of their own,
with a module-level creator that registers ALE, builds the env and wraps it there.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import sys
from typing import Any

import gymnasium as gym

from tuner.errors import TunerError
from tuner.mlflow_names import AGENT_RETURNS
from tuner.spec import MultiAgentSpec, SpecError, SpecIssue, is_ale_id

# `wrappers: atari`, as RLlib's Atari examples set it up: the ALE env steps one frame at
# a time with no sticky actions and the minimal action set (like the old "NoFrameskip-v4"
# ids), and RLlib's wrapper skips 4 frames (max over the last 2), resizes to 84x84 grey
# in [-1, 1] and stacks 4 of them. A spec's env_config overrides these defaults.
ATARI_ENV_DEFAULTS: dict[str, Any] = {
    "frameskip": 1,
    "full_action_space": False,
    "repeat_action_probability": 0.0,
}
ATARI_DIM = 84
ATARI_FRAMESTACK = 4
ATARI_OBS_SHAPE = (ATARI_DIM, ATARI_DIM, ATARI_FRAMESTACK)
# A wrapped env's name in Tune's registry and in the trial's config: "<env>+<wrappers>".
# Neither gymnasium ids nor import paths (tuner.spec) contain "+".
WRAPPED_SEP = "+"


def is_import_path(env: str) -> bool:
    """Whether `env` names a Python object ('package.module:Name') rather than a gym id."""
    return ":" in env


def load_object(path: str) -> Any:
    """Imports 'package.module:Name' and returns the object.

    Args:
        path: The import path.

    Returns:
        The object it names.

    Raises:
        ImportError: The module cannot be imported.
        AttributeError: The module has no such name.
    """
    module_name, _, attr = path.partition(":")
    module = importlib.import_module(module_name)
    return getattr(module, attr)


def env_object_problem(path: str, obj: Any) -> str | None:
    """Why an imported object may not serve as an env (None if it may).

    Only gymnasium.Env subclasses (RLlib's MultiAgentEnv is one) and plain Python
    functions outside the standard library qualify, so a spec cannot make the service
    call `os:system` and friends.
    """
    module = (getattr(obj, "__module__", None) or "").split(".")[0]
    if module in sys.stdlib_module_names or module == "builtins":
        return f"{path} is in the standard library, not an environment"
    if inspect.isclass(obj):
        if issubclass(obj, gym.Env):
            return None
        return f"{path} is neither a gymnasium.Env nor an RLlib MultiAgentEnv subclass"
    if inspect.isfunction(obj):
        return None
    return (
        f"{path} is neither a gymnasium.Env / RLlib MultiAgentEnv subclass nor a factory function"
    )


def is_multi_agent_env(instance: Any) -> bool:
    """Whether a built env is an RLlib MultiAgentEnv (RLlib's PettingZoo wrappers are)."""
    from ray.rllib.env.multi_agent_env import MultiAgentEnv

    return isinstance(instance, MultiAgentEnv)


def check_agents(
    env: str, instance: Any, multi_agent: MultiAgentSpec | None, metric: str | None = None
) -> list[str]:
    """Checks a built (and reset) env against the spec's `multi_agent` section: a
    MultiAgentEnv needs one and a single-agent env takes none, every agent id in
    policy_mapping and a per-agent metric must be one of the env's `possible_agents`
    (when it lists them). Returns warnings (a policy that drives no agent), raises
    SpecError."""
    multi = is_multi_agent_env(instance)
    if multi and multi_agent is None:
        raise SpecError.one(
            "multi_agent",
            f"{env} is an RLlib MultiAgentEnv: add a multi_agent section (policies, "
            "policy_mapping)",
            None,
        )
    if multi_agent is None:
        return []
    if not multi:
        raise SpecError.one(
            "multi_agent",
            f"needs an env that is an RLlib MultiAgentEnv; {env} is single-agent "
            "(leave multi_agent out)",
            multi_agent.model_dump(),
        )
    agents = [str(a) for a in getattr(instance, "possible_agents", None) or []]
    if not agents:
        return ["the env lists no possible_agents: multi_agent.policy_mapping is not checked"]
    shown = ", ".join(agents[:20]) + (", ..." if len(agents) > 20 else "")
    issues = [
        SpecIssue(
            loc=f"multi_agent.policy_mapping.{agent}",
            value=agent,
            msg=f"{env} has no such agent (its agents: {shown})",
        )
        for agent in multi_agent.policy_mapping
        if agent != "*" and agent not in agents
    ]
    prefix = f"{AGENT_RETURNS}/"
    if metric and metric.removeprefix("evaluation/").startswith(prefix):
        agent = metric.removeprefix("evaluation/")[len(prefix) :]
        if agent not in agents:
            issues.append(
                SpecIssue(loc="metric", value=metric, msg=f"{env} has no agent {agent!r} ({shown})")
            )
    if issues:
        raise SpecError(issues)
    used = {multi_agent.policy_of(a) for a in agents}
    return [
        f"multi_agent policy {pid!r} drives none of the env's agents ({shown}): it does not train"
        for pid in multi_agent.policies
        if pid not in used
    ]


def env_config_for(env_config: dict[str, Any], wrappers: str | None) -> dict[str, Any]:
    """The env_config an env is built with: the wrappers' defaults under the spec's own."""
    if wrappers == "atari":
        return {**ATARI_ENV_DEFAULTS, **env_config}
    return dict(env_config)


def env_name(env: str, wrappers: str | None) -> str:
    """The name RLlib knows a (wrapped) env by: the env itself, or "<env>+<wrappers>"."""
    return f"{env}{WRAPPED_SEP}{wrappers}" if wrappers else env


def split_env_name(name: str) -> tuple[str, str | None]:
    """The env and the wrappers of a name made by `env_name`."""
    env, sep, wrappers = name.partition(WRAPPED_SEP)
    return env, (wrappers if sep else None)


def register_ale() -> None:
    """Makes the ALE ids known to gymnasium in this process (ale-py ships the ROMs)."""
    import ale_py

    gym.register_envs(ale_py)


class WrapperError(TunerError, ValueError):
    """The named wrappers do not fit the env they were put around."""


def wrap_env(instance: Any, wrappers: str | None) -> Any:
    """`instance` inside the named wrappers (None: unchanged)."""
    if wrappers is None:
        return instance
    if wrappers == "atari":
        from ray.rllib.env.wrappers.atari_wrappers import wrap_atari_for_new_api_stack

        shape = tuple(getattr(instance.observation_space, "shape", None) or ())
        if len(shape) != 3 or shape[-1] != 3:
            instance.close()
            raise WrapperError(
                f"wrappers 'atari' preprocesses RGB frames (height x width x 3); this env "
                f"observes {shape} (is env_config setting obs_type?)"
            )
        return wrap_atari_for_new_api_stack(instance, dim=ATARI_DIM, framestack=ATARI_FRAMESTACK)
    raise WrapperError(f"unknown wrappers {wrappers!r}")


def make_env(env: str, env_config: dict[str, Any], wrappers: str | None = None) -> Any:
    """Builds the environment exactly as a trial will.

    Args:
        env: A gymnasium id or an import path ("package.module:ClassOrFactory").
        env_config: Passed to the env's constructor / factory.
        wrappers: The spec's `wrappers` (atari), if any.

    Returns:
        The env, inside its wrappers.

    Raises:
        ValueError: An import path names something that is not an env.
    """
    if is_import_path(env):
        obj = load_object(env)
        problem = env_object_problem(env, obj)
        if problem:
            raise ValueError(problem)
        return wrap_env(obj(env_config), wrappers)
    if is_ale_id(env):
        register_ale()
    return wrap_env(gym.make(env, **env_config_for(env_config, wrappers)), wrappers)


def _creator(path: str, env_context: Any) -> Any:
    # Module-level so that RLlib's env runners (other processes) unpickle it by reference.
    return load_object(path)(env_context)


def _wrapped_creator(env: str, wrappers: str | None, env_context: Any) -> Any:
    # Module-level, as _creator: ALE registration and the wrappers happen in the worker.
    return make_env(env, dict(env_context), wrappers)


def register_env(env: str, wrappers: str | None = None) -> str:
    """Registers an env with Tune, so every worker can build it.

    An import-path env, an ALE id or a wrapped env is registered; other gymnasium ids are
    returned unchanged.

    Args:
        env: A gymnasium id or an import path.
        wrappers: The spec's `wrappers` (atari), if any.

    Returns:
        The name RLlib should use.
    """
    if not wrappers and not is_import_path(env) and not is_ale_id(env):
        return env
    from ray.tune.registry import register_env as tune_register_env

    name = env_name(env, wrappers)
    if is_import_path(env) and not wrappers:
        tune_register_env(name, functools.partial(_creator, env))
    else:
        tune_register_env(name, functools.partial(_wrapped_creator, env, wrappers))
    return name


def check_env(
    env: str,
    env_config: dict[str, Any],
    wrappers: str | None = None,
    *,
    multi_agent: MultiAgentSpec | None = None,
    metric: str | None = None,
) -> list[str]:
    """Builds and resets the env once, inside its wrappers, and checks it.

    The wrappers' observation space is checked too, and the env against the spec's
    `multi_agent` section (check_agents).

    Args:
        env: A gymnasium id or an import path.
        env_config: Passed to the env's constructor / factory.
        wrappers: The spec's `wrappers` (atari), if any.
        multi_agent: The spec's `multi_agent` section, if any.
        metric: The spec's metric (a per-agent or per-policy one is checked against the
            env's agents).

    Returns:
        Warnings (a policy that drives no agent).

    Raises:
        SpecError: Naming `env`/`env_config`/`wrappers`/`multi_agent`.
    """
    if is_import_path(env):
        try:
            problem = env_object_problem(env, load_object(env))
        except (ImportError, AttributeError) as err:
            raise SpecError(
                [SpecIssue(loc="env", msg=f"cannot import: {err}", value=env)]
            ) from None
        if problem:
            raise SpecError([SpecIssue(loc="env", msg=problem, value=env)])
    try:
        instance = make_env(env, env_config, wrappers)
    except WrapperError as err:
        raise SpecError.one("wrappers", str(err), wrappers) from None
    except (ImportError, AttributeError) as err:
        raise SpecError([SpecIssue(loc="env", msg=f"cannot import: {err}", value=env)]) from None
    except gym.error.Error as err:
        raise SpecError(
            [SpecIssue(loc="env", msg=f"not a gymnasium env: {err}", value=env)]
        ) from None
    except TypeError as err:
        raise SpecError(
            [SpecIssue(loc="env_config", msg=f"rejected by {env}: {err}", value=env_config)]
        ) from None
    except Exception as err:  # noqa: BLE001 - any constructor failure is the user's env
        raise SpecError(
            [
                SpecIssue(
                    loc="env", msg=f"constructor failed: {type(err).__name__}: {err}", value=env
                )
            ]
        ) from None
    try:
        if not isinstance(instance, gym.Env) and not hasattr(instance, "reset"):
            raise SpecError(
                [
                    SpecIssue(
                        loc="env",
                        msg="did not return a gymnasium.Env or RLlib MultiAgentEnv",
                        value=type(instance).__name__,
                    )
                ]
            )
        try:
            reset = instance.reset(seed=0)
        except Exception as err:  # noqa: BLE001
            raise SpecError(
                [
                    SpecIssue(
                        loc="env", msg=f"reset() failed: {type(err).__name__}: {err}", value=env
                    )
                ]
            ) from None
        if wrappers == "atari":
            shape = tuple(getattr(instance.observation_space, "shape", None) or ())
            obs = reset[0] if isinstance(reset, tuple) else reset
            if shape != ATARI_OBS_SHAPE or getattr(obs, "shape", None) != ATARI_OBS_SHAPE:
                raise SpecError.one(
                    "wrappers",
                    f"the wrapped env observes {shape}, not the {ATARI_OBS_SHAPE} frames the "
                    "Atari CNN expects",
                    wrappers,
                )
        return check_agents(env, instance, multi_agent, metric)
    finally:
        close = getattr(instance, "close", None)
        if close:
            close()
