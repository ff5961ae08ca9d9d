"""Checks of a spec that need RLlib: config keys, the built config, the env."""

from __future__ import annotations

from collections.abc import Sequence

from tuner.search_spaces import Domain, resolve_space
from tuner.spec import ExperimentSpec, SpecError, SpecIssue
from tuner.trials._algorithms import (
    ENV_CONFIG_PREFIX,
    MODEL_PREFIX,
    build_config,
    preset_warnings,
    rllib_keys,
)
from tuner.trials._envs import check_env

# Spec sections own these; setting them under `config` would fight the spec.
_OWNED_BY_SPEC = {
    "env": "env",
    "env_config": "env_config",
    "seed": "seed",
    "num_env_runners": "resources.num_env_runners",
    "num_learners": "resources.num_learners",
    "num_gpus_per_learner": "resources.num_gpus_per_learner",
    "num_envs_per_env_runner": "resources.num_envs_per_env_runner",
    "num_cpus_per_env_runner": "resources.num_cpus_per_env_runner",
    "num_gpus_per_env_runner": "resources.num_gpus_per_env_runner",
    "num_cpus_for_main_process": "resources.num_cpus_for_main_process",
    "placement_strategy": "resources.placement_strategy",
    "evaluation_interval": "evaluation.interval",
    "evaluation_duration": "evaluation.duration",
    "evaluation_duration_unit": "evaluation.duration (episodes)",
    "model_config": "model",
}


def search_space(spec: ExperimentSpec) -> dict[str, Domain]:
    """The space the spec's sweep searches (tuner.search_spaces.resolve_space)."""
    return resolve_space(spec)


def validate_spec(
    spec: ExperimentSpec,
    *,
    build_env: bool = True,
    allowed_env_modules: Sequence[str] | None = None,
    space: dict[str, Domain] | None = None,
) -> list[str]:
    """Checks what only RLlib can check; returns warnings, raises SpecError. `space` is
    the resolved search space (resolved here when not given).

    With `allowed_env_modules` (the service), an import-path env must live under one of
    those module prefixes; it is checked before anything is imported."""
    if allowed_env_modules is not None and ":" in spec.env:
        module = spec.env.partition(":")[0]
        if not any(module == m or module.startswith(m + ".") for m in allowed_env_modules):
            raise SpecError(
                [
                    SpecIssue(
                        loc="env",
                        value=spec.env,
                        msg="this service accepts envs from "
                        + (", ".join(allowed_env_modules) if allowed_env_modules else "no module")
                        + " (TUNER_ENV_MODULES); use a gymnasium id",
                    )
                ]
            )
    issues: list[SpecIssue] = []
    warnings = preset_warnings(spec.algorithm)
    known = rllib_keys(spec.base_algorithm)
    for key, value in spec.config.items():
        if key in _OWNED_BY_SPEC:
            issues.append(
                SpecIssue(
                    loc=f"config.{key}",
                    value=value,
                    msg=f"set it as `{_OWNED_BY_SPEC[key]}` in the spec",
                )
            )
        elif key not in known:
            issues.append(
                SpecIssue(
                    loc=f"config.{key}",
                    value=value,
                    msg=f"unknown RLlib {spec.base_algorithm} setting",
                )
            )
    if spec.config.get("noisy") and "noisy=True" not in " ".join(warnings):
        warnings.append(
            "noisy=True is accepted but has no effect on RLlib 2.60's new API "
            "stack: exploration stays epsilon-greedy"
        )
    for key, dom in (resolve_space(spec) if space is None else space).items():
        prefix = next((p for p in (MODEL_PREFIX, ENV_CONFIG_PREFIX) if key.startswith(p)), None)
        if prefix:
            if not key[len(prefix) :] or "." in key[len(prefix) :]:
                issues.append(
                    SpecIssue(
                        loc=f"search.space.{key}",
                        value=str(dom),
                        msg=f"name one key after {prefix!r}",
                    )
                )
        elif key not in known:
            issues.append(
                SpecIssue(
                    loc=f"search.space.{key}",
                    value=str(dom),
                    msg=f"unknown RLlib {spec.base_algorithm} setting",
                )
            )
        if spec.scheduler.type == "pbt" and dom.kind == "grid":
            issues.append(
                SpecIssue(
                    loc=f"search.space.{key}",
                    value=str(dom),
                    msg="pbt mutates from sampled domains; use choice",
                )
            )
    if issues:
        raise SpecError(issues)
    try:
        config = build_config(spec)
        config.validate()
    except Exception as err:  # noqa: BLE001 - RLlib raises ValueError and friends
        raise SpecError(
            [SpecIssue(loc="config", value=spec.config, msg=f"RLlib rejects the config: {err}")]
        ) from None
    if build_env:
        check_env(spec.env, spec.env_config)
    return warnings
