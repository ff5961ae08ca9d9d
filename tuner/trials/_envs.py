"""Environment resolution: gymnasium ids and 'package.module:ClassOrFactory' paths.

An import path names a gymnasium.Env subclass, an RLlib MultiAgentEnv subclass (a
gymnasium.Env too) or a factory function returning either (a PettingZoo env comes in
through a factory that wraps it in RLlib's PettingZooEnv / ParallelPettingZooEnv).

The env is built once in the driver before any trial starts, so a wrong id, an
import error or a constructor exception is a validation error naming the field,
not a failed Ray actor half a minute later; so is a multi-agent env without the
spec's `multi_agent` section (or the other way round) and an agent id the env lacks.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import sys
from typing import Any

import gymnasium as gym

from tuner.mlflow_names import AGENT_RETURNS
from tuner.spec import MultiAgentSpec, SpecError, SpecIssue


def is_import_path(env: str) -> bool:
    """Whether `env` names a Python object ('package.module:Name') rather than a gym id."""
    return ":" in env


def load_object(path: str) -> Any:
    """Imports 'package.module:Name' and returns the object."""
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


def make_env(env: str, env_config: dict[str, Any]) -> Any:
    """Builds the environment exactly as a trial will."""
    if is_import_path(env):
        obj = load_object(env)
        problem = env_object_problem(env, obj)
        if problem:
            raise ValueError(problem)
        return obj(env_config)
    return gym.make(env, **env_config)


def _creator(path: str, env_context: Any) -> Any:
    # Module-level so that RLlib's env runners (other processes) unpickle it by reference.
    return load_object(path)(env_context)


def register_env(env: str) -> str:
    """Registers an import-path env with Tune (so every worker can build it) and
    returns the name RLlib should use; gymnasium ids are returned unchanged."""
    if not is_import_path(env):
        return env
    from ray.tune.registry import register_env as tune_register_env

    tune_register_env(env, functools.partial(_creator, env))
    return env


def check_env(
    env: str,
    env_config: dict[str, Any],
    *,
    multi_agent: MultiAgentSpec | None = None,
    metric: str | None = None,
) -> list[str]:
    """Builds and resets the env once, and checks it against the spec's `multi_agent`
    section (check_agents); raises SpecError naming `env`/`env_config`/`multi_agent`,
    returns warnings."""
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
        instance = make_env(env, env_config)
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
            instance.reset(seed=0)
        except Exception as err:  # noqa: BLE001
            raise SpecError(
                [
                    SpecIssue(
                        loc="env", msg=f"reset() failed: {type(err).__name__}: {err}", value=env
                    )
                ]
            ) from None
        return check_agents(env, instance, multi_agent, metric)
    finally:
        close = getattr(instance, "close", None)
        if close:
            close()
