"""The spec's own code in a trial: the import paths a trial config carries (CODE_KEY),
imported in the trial's process and set where RLlib reads them."""

from __future__ import annotations

from typing import Any

from tuner.ray_internals import MODEL_CONFIG_KEY, RL_MODULE_SPEC_KEY
from tuner.rllib._envs import load_object
from tuner.rllib._trial_config import CODE_KEY
from tuner.spec import ExperimentSpec, import_paths, resolve_paths


def with_user_code(config: dict[str, Any]) -> dict[str, Any]:
    """A trial's config dict with the spec's code (CODE_KEY) imported and set where RLlib
    reads it: each import path its RLlib settings name at a code position (`config`,
    `model`, sampled search-space values; e.g. `replay_buffer_config.type`) replaced by the
    class or function, the callbacks and the module. Runs in the trial's process; the paths
    were checked against the operator's allowed modules before the sweep started."""
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    out = {k: v for k, v in config.items() if k != CODE_KEY}
    code = config.get(CODE_KEY) or {}
    if code.get("paths"):
        out = resolve_paths(out, code["paths"])
    if code.get("callbacks"):
        out["callbacks"] = [load_object(path) for path in code["callbacks"]]
    if code.get("module"):
        # the sampled `model.*` values are in the config by now: the module gets them all
        model = dict(out.get(MODEL_CONFIG_KEY) or {})
        out[RL_MODULE_SPEC_KEY] = RLModuleSpec(
            module_class=load_object(code["module"]), model_config=model
        )
    return out


def user_code(spec: ExperimentSpec) -> dict[str, Any]:
    """The spec's code by import path, as a trial config carries it under CODE_KEY.

    Callbacks, module, and the import paths its `config`, `model` and search space name
    at RLlib code positions ("paths").

    Args:
        spec: The sweep's spec.

    Returns:
        The code, by kind.
    """
    code: dict[str, Any] = {}
    if spec.callbacks:
        code["callbacks"] = list(spec.callbacks)
    if spec.module:
        code["module"] = spec.module
    paths = import_paths(spec.config, spec.model, space=spec.search.space or {})
    if paths:
        code["paths"] = paths
    return code
