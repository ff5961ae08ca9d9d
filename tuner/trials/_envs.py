"""Environment resolution: gymnasium ids and 'package.module:ClassOrFactory' paths.

The env is built once in the driver before any trial starts, so a wrong id, an
import error or a constructor exception is a validation error naming the field,
not a failed Ray actor half a minute later.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import sys
from typing import Any

import gymnasium as gym

from tuner.spec import SpecError, SpecIssue


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

    Only gymnasium.Env subclasses and plain Python functions outside the standard
    library qualify, so a spec cannot make the service call `os:system` and friends.
    """
    module = (getattr(obj, "__module__", None) or "").split(".")[0]
    if module in sys.stdlib_module_names or module == "builtins":
        return f"{path} is in the standard library, not an environment"
    if inspect.isclass(obj):
        return None if issubclass(obj, gym.Env) else f"{path} is not a gymnasium.Env subclass"
    if inspect.isfunction(obj):
        return None
    return f"{path} is neither a gymnasium.Env subclass nor a factory function"


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


def check_env(env: str, env_config: dict[str, Any]) -> None:
    """Builds and resets the env once; raises SpecError naming `env`/`env_config`."""
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
                        msg="did not return a gymnasium.Env",
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
    finally:
        close = getattr(instance, "close", None)
        if close:
            close()
