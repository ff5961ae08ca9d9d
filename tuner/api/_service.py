"""The service itself: liveness and the statuses (public, no token), its Ray cluster,
and what it offers to start a sweep from (its algorithms, its example specs)."""

from __future__ import annotations

from pathlib import Path

import tuner
from tuner import algorithms as registry
from tuner.algorithms import AlgorithmInfo
from tuner.api._deps import LauncherDep, StoreDep
from tuner.api._shared import guarded_router, public_router
from tuner.statuses import SweepStatus
from tuner.views import ClusterView, ExampleSpec, Health, NodeView, StatusList

public = public_router()
router = guarded_router()


@public.get("/healthz", response_model=Health, tags=["service"])
def healthz(store: StoreDep, launcher: LauncherDep) -> Health:
    """Liveness: the store answers; the Ray address the service submits to."""
    store.count_by_status({SweepStatus.RUNNING})
    return Health(
        status="ok",
        version=tuner.__version__,
        ray_address=launcher.address,
        store=store.url.get_backend_name(),
    )


@public.get("/statuses", response_model=StatusList, tags=["service"])
def statuses() -> StatusList:
    """The statuses a sweep and a trial can have, and which of a sweep's are terminal,
    stoppable and resumable (what the web page acts on). Public, as the OpenAPI schema
    that lists them: no token needed."""
    return StatusList.current()


@router.get("/cluster", response_model=ClusterView, tags=["service"])
def cluster(launcher: LauncherDep) -> ClusterView:
    """The Ray cluster's alive nodes with their CPUs, GPUs and custom resources: what
    a sweep's trials can be placed on (the same list `POST /experiments` checks)."""
    nodes = launcher.cluster()
    views = [
        NodeView(
            node_id=n["node_id"],
            node_ip=n["node_ip"],
            is_head=n["is_head"],
            cpus=n["resources"].get("CPU", 0.0),
            gpus=n["resources"].get("GPU", 0.0),
            resources={k: v for k, v in n["resources"].items() if not k.startswith("node:")},
        )
        for n in nodes or []
    ]
    views.sort(key=lambda v: (not v.is_head, v.node_ip or "", v.node_id))
    return ClusterView(
        ray_address=launcher.address,
        reachable=nodes is not None,
        nodes=views,
        cpus=sum(v.cpus for v in views),
        gpus=sum(v.gpus for v in views),
    )


@router.get("/algorithms", response_model=list[AlgorithmInfo], tags=["algorithms"])
def algorithms() -> list[AlgorithmInfo]:
    """Algorithms and presets: base algorithm, what each supports, its fixed settings,
    performance defaults and default search space (the registry, tuner/algorithms)."""
    return registry.algorithms()


_EXAMPLES = Path(tuner.__file__).resolve().parent.parent / "experiments"


@router.get("/examples", response_model=list[ExampleSpec], tags=["experiments"])
def examples() -> list[ExampleSpec]:
    """The example specs shipped with tuner (experiments/*.yaml), to start a new sweep
    from on the web page; empty where the package was installed without them."""
    if not _EXAMPLES.is_dir():
        return []
    out = []
    for path in sorted(_EXAMPLES.glob("*.yaml")):
        text = path.read_text()
        out.append(ExampleSpec(name=path.stem, spec=text, needs=_example_needs(text)))
    return out


def _example_needs(text: str) -> list[str]:
    """What an example spec needs of the service: the top-level packages of the code it
    names by import path (to allow with TUNER_ALLOWED_MODULES), and the earlier sweep a
    warm start reads."""
    from tuner.spec import import_paths, load_yaml_strict, parse_spec

    try:
        spec = parse_spec(load_yaml_strict(text))
    except Exception:  # noqa: BLE001 - the form's preview says what is wrong with it
        return []
    named = [*spec.callbacks, *import_paths(spec.config, spec.model, space=spec.search.space)]
    named += [p for p in (spec.module, spec.env) if p and ":" in p]
    if spec.custom_algorithm:
        named.append(spec.algorithm)
    packages = sorted({p.partition(":")[0].split(".")[0] for p in named})
    needs = [f"TUNER_ALLOWED_MODULES={','.join(packages)}"] if packages else []
    if spec.search.warm_start is not None:
        needs.append(f"an earlier sweep named {spec.search.warm_start.from_} (search.warm_start)")
    return needs
