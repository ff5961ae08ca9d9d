"""Does one trial fit the cluster? Checked up front instead of pending forever."""

from __future__ import annotations

from typing import Any

from tuner.spec import ExperimentSpec, SpecError, SpecIssue
from tuner.trials._algorithms import build_config, trainable_for


def _fmt(res: dict[str, float]) -> str:
    return "{" + ", ".join(f"{k}: {v:g}" for k, v in sorted(res.items())) + "}"


def trial_resources(spec: ExperimentSpec) -> tuple[dict[str, float], list[dict[str, float]]]:
    """(total, bundles) of one trial's placement group, as RLlib requests it (the
    spec's own training loop: one bundle of its resources)."""
    if spec.custom_algorithm:
        from tuner.trials._custom import custom_resources

        res = custom_resources(spec)
        return dict(res), [dict(res)]
    pgf = trainable_for(spec).default_resource_request(build_config(spec))
    total = {k: float(v) for k, v in pgf.required_resources.items() if v}
    bundles = [{k: float(v) for k, v in b.items() if v} for b in pgf.bundles]
    return total, bundles


def check_fits(spec: ExperimentSpec, nodes: list[dict[str, Any]]) -> None:
    """Raises SpecError (loc `resources`) when one trial can never be placed on the
    alive nodes (each a dict of total resources: {"CPU": 2.0, "GPU": 1.0, ...})."""
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
    """Total resources of each alive node of the connected Ray cluster."""
    import ray

    return [dict(n["Resources"]) for n in ray.nodes() if n.get("Alive")]
