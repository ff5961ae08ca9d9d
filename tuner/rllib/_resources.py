"""Does one trial fit the cluster? Checked up front instead of pending forever."""

from __future__ import annotations

from typing import Any

from tuner.rllib._config import build_config, trainable_for
from tuner.spec import ExperimentSpec, SpecError, SpecIssue


def _fmt(res: dict[str, float]) -> str:
    return "{" + ", ".join(f"{k}: {v:g}" for k, v in sorted(res.items())) + "}"


def trial_resources(spec: ExperimentSpec) -> tuple[dict[str, float], list[dict[str, float]]]:
    """One trial's placement group, as RLlib requests it.

    The spec's own training loop: one bundle of its resources.

    Args:
        spec: The sweep's spec.

    Returns:
        (total, bundles).
    """
    if spec.custom_algorithm:
        from tuner.rllib._custom import custom_resources

        res = custom_resources(spec)
        return dict(res), [dict(res)]
    pgf = trainable_for(spec).default_resource_request(build_config(spec))
    total = {k: float(v) for k, v in pgf.required_resources.items() if v}
    bundles = [{k: float(v) for k, v in b.items() if v} for b in pgf.bundles]
    return total, bundles


def check_fits(spec: ExperimentSpec, nodes: list[dict[str, Any]]) -> None:
    """Checks that one trial can be placed on the alive nodes.

    Args:
        spec: The sweep's spec.
        nodes: The alive nodes, each a dict of total resources: {"CPU": 2.0, "GPU": 1.0,
            ...}.

    Raises:
        SpecError: (loc `resources`) when one trial can never be placed.
    """
    total, bundles = trial_resources(spec)
    cluster: dict[str, float] = {}
    for node in nodes:
        for key, value in node.items():
            cluster[key] = cluster.get(key, 0.0) + float(value)
    short = {k: v for k, v in total.items() if v > cluster.get(k, 0.0) + 1e-9}
    problem = None
    if short:
        problem = (
            f"one trial needs {_fmt(total)} but the cluster has "
            f"{_fmt({k: cluster.get(k, 0.0) for k in total})}"
        )
    else:
        for bundle in bundles:
            if not any(all(v <= n.get(k, 0.0) + 1e-9 for k, v in bundle.items()) for n in nodes):
                problem = f"no node can hold the bundle {_fmt(bundle)} of a trial"
                break
        if (
            problem is None
            and spec.resources.placement_strategy == "STRICT_PACK"
            and not any(all(v <= n.get(k, 0.0) + 1e-9 for k, v in total.items()) for n in nodes)
        ):
            problem = f"STRICT_PACK needs {_fmt(total)} on one node; no node has that"
        if (
            problem is None
            and spec.resources.placement_strategy == "STRICT_SPREAD"
            and len(bundles) > len(nodes)
        ):
            problem = f"STRICT_SPREAD needs {len(bundles)} nodes, the cluster has {len(nodes)}"
    if problem:
        custom = _custom_driver_of(spec, short, cluster)
        if custom is not None:
            raise SpecError([custom])
        field, why = _driver_of(spec, short or total)
        raise SpecError(
            [
                SpecIssue(
                    loc=f"resources.{field}" if field else "resources",
                    msg=(f"{why}: " if why else "")
                    + problem
                    + "; lower num_env_runners, num_cpus_per_env_runner or the GPU fractions",
                    value=spec.resources.model_dump(),
                )
            ]
        )


# RLlib's settings that ask for custom resources (keys other than CPU and GPU), and what
# each asks them for
CUSTOM_RESOURCE_SETTINGS: dict[str, str] = {
    "custom_resources_per_env_runner": "env runner",
    "custom_resources_per_learner": "learner",
    "custom_resources_for_main_process": "main process",
    "custom_resources_per_offline_eval_runner": "offline eval runner",
}


def _custom_driver_of(
    spec: ExperimentSpec, short: dict[str, float], cluster: dict[str, float]
) -> SpecIssue | None:
    """The issue of a custom resource the cluster lacks, on the config setting that asks
    for it (the one asking most, when several do); None when CPU or GPU is short too."""
    if "CPU" in short or "GPU" in short:
        return None
    r = spec.resources
    count = {
        "custom_resources_per_env_runner": r.num_env_runners,
        "custom_resources_per_learner": r.num_learners,
    }
    for key in sorted(short):
        asking = [
            (count.get(setting, 1) * per, setting, per)
            for setting in CUSTOM_RESOURCE_SETTINGS
            if isinstance(spec.config.get(setting), dict)
            and (per := float(spec.config[setting].get(key) or 0)) > 0
        ]
        if not asking:
            continue
        _, setting, per = max(asking, key=lambda a: a[0])
        return SpecIssue(
            loc=f"config.{setting}",
            msg=f"{per:g} {key} per {CUSTOM_RESOURCE_SETTINGS[setting]}: one trial needs "
            f"{short[key]:g} {key}; the cluster has {cluster.get(key, 0.0):g}; lower it, or "
            f"add nodes that have {key}",
            value=spec.config[setting],
        )
    return None


def _driver_of(spec: ExperimentSpec, short: dict[str, float]) -> tuple[str | None, str]:
    """The resources field that makes a trial this big, and the sum in words."""
    r = spec.resources
    if "GPU" in short:
        if r.num_gpus_per_learner:
            learners = max(r.num_learners, 1)
            return "num_gpus_per_learner", (
                f"{learners} learner(s) x {r.num_gpus_per_learner:g} GPU need {short['GPU']:g} GPUs"
            )
        return "num_gpus_per_env_runner", f"the env runners need {short['GPU']:g} GPUs"
    if "CPU" in short:
        if r.num_env_runners:
            return "num_env_runners", (
                f"{r.num_env_runners} env runners x {r.num_cpus_per_env_runner:g} CPU + the "
                f"driver need {short['CPU']:g} CPUs"
            )
        return "num_cpus_for_main_process", f"the trial needs {short['CPU']:g} CPUs"
    return None, ""


def alive_nodes() -> list[dict[str, float]]:
    """Total resources of each alive node of the connected Ray cluster.

    Returns:
        Each node's resources, by Ray's names.
    """
    import ray

    return [dict(n["Resources"]) for n in ray.nodes() if n.get("Alive")]
