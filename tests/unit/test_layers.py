"""The house rules of tuner/'s imports, checked on the source:

- no import cycles among tuner's modules, counting imports inside functions and under
  TYPE_CHECKING;
- a package is entered only through its public face (its __init__): no module imports
  another package's private module;
- each package imports only from its own layer or the layers below (docs/architecture.md);
- no private name of Ray, RLlib or Tune outside the one adapter (the package
  tuner/ray_internals/, every module of it).
"""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import tuner

PACKAGE = Path(tuner.__file__).parent
ROOT = PACKAGE.parent

# bottom to top; a module may import from its own layer and the ones below
LAYERS = [
    # names shared by every layer: the error base, settings, views, MLflow and result
    # keys, statuses, search-space domains and the algorithm registry (data), importance
    # (pure), the adapter to Ray's private names, the reader of tuner's own data files
    {
        "tuner",
        "tuner.errors",
        "tuner.data_files",
        "tuner.settings",
        "tuner.views",
        "tuner.mlflow_names",
        "tuner.tune_paths",
        "tuner.results",
        "tuner.seed_stats",
        "tuner.statuses",
        "tuner.search_spaces",
        "tuner.algorithms",
        "tuner.importance",
        "tuner.ray_internals",
    },
    {"tuner.store", "tuner.launcher"},  # the read model and the cluster
    {"tuner.spec"},
    {"tuner.rllib"},
    {"tuner.tracking"},
    {"tuner.validation"},
    {"tuner.sweep"},
    {"tuner.service", "tuner.purge", "tuner.compare", "tuner.api", "tuner.cli"},
    {"tuner.trials"},  # old import paths for what earlier versions pickled
]


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def unit_of(module: str) -> str:
    """The package or top-level module a module belongs to (tuner.rllib._config ->
    tuner.rllib; tuner.cli -> tuner.cli)."""
    parts = module.split(".")
    return ".".join(parts[:2])


def layer_of(module: str) -> int:
    unit = unit_of(module)
    return next(i for i, layer in enumerate(LAYERS) if unit in layer)


def modules() -> dict[str, ast.Module]:
    return {
        module_name(p): ast.parse(p.read_text())
        for p in PACKAGE.rglob("*.py")
        if "migrations" not in p.parts
    }


def imports(tree: ast.Module, known: set[str], here: str) -> set[str]:
    """Every tuner module a module's code imports, wherever the import statement is."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.split(".")[0] == "tuner"}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.split(".")[0] != "tuner":
                continue
            subs = {f"{node.module}.{a.name}" for a in node.names} & known
            # `from tuner.pkg import _sibling` inside tuner.pkg names the sibling only
            inside = unit_of(here) == unit_of(node.module) and here != node.module
            if subs and (inside or len(subs) == len(node.names)):
                out |= subs
            else:
                out |= {node.module} | subs
    return out


def graph() -> dict[str, set[str]]:
    trees = modules()
    known = set(trees)
    return {name: imports(tree, known, name) - {name} for name, tree in trees.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = []
            while True:
                w = stack.pop()
                on.discard(w)
                scc.append(w)
                if w == v:
                    break
            if len(scc) > 1:
                out.append(sorted(scc))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_the_import_graph_is_acyclic():
    edges = graph()
    assert len(edges) > 60
    assert sum(map(len, edges.values())) > 150  # the graph is real
    assert cycles(edges) == []


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_a_package_is_entered_only_through_its_public_face():
    offenders = []
    for module, targets in graph().items():
        for target in targets:
            private = any(part.startswith("_") for part in target.split(".")[2:])
            if private and unit_of(target) != unit_of(module):
                offenders.append(f"{module} -> {target}")
    assert offenders == []


def test_each_package_imports_only_its_layer_and_below():
    offenders = [
        f"{module} (layer {layer_of(module)}) -> {target} (layer {layer_of(target)})"
        for module, targets in graph().items()
        for target in targets
        if layer_of(target) > layer_of(module)
    ]
    assert offenders == []


def test_every_module_has_a_layer():
    assert {unit_of(m) for m in modules()} <= set().union(*LAYERS)


# --- private names of Ray, RLlib and Tune ---------------------------------------------------

# the one adapter: every module under it may use them (tests/unit/test_ray_internals.py
# checks that each one it uses is listed in its ray_internals.yaml)
ADAPTER = PACKAGE / "ray_internals"
# standard-library names with a leading underscore that are public API
PUBLIC_UNDERSCORE = {"_exit", "_asdict", "_replace", "_fields", "_make"}


def sources() -> dict[Path, ast.Module]:
    paths = [*PACKAGE.rglob("*.py"), *(ROOT / "bench").rglob("*.py")]
    return {p: ast.parse(p.read_text()) for p in paths if "migrations" not in p.parts}


def own_names(trees: dict[Path, ast.Module]) -> set[str]:
    """Private names tuner and bench/ define themselves (functions, classes, variables,
    attributes they set, parameters)."""
    own = set()
    for tree in trees.values():
        for n in ast.walk(tree):
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                own.add(n.name)
            elif isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store):
                own.add(n.attr)
            elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                own.add(n.id)
            elif isinstance(n, ast.arg):
                own.add(n.arg)
            elif isinstance(n, ast.alias):
                own.add(n.asname or n.name)
    return {name for name in own if name.startswith("_")}


def rllib_private_config_keys() -> set[str]:
    from ray.rllib.algorithms.ppo import PPOConfig

    return {k for k in PPOConfig().to_dict() if k.startswith("_")}


def private_uses(path: Path, tree: ast.Module, own: set[str], config_keys: set[str]) -> list[str]:
    found = []

    def private(name: str) -> bool:
        return (
            name.startswith("_")
            and not name.startswith("__")
            and name not in own
            and name not in PUBLIC_UNDERSCORE
        )

    # bench/ may reach into stable-baselines3 or rl-zoo3 (the tools it compares with),
    # never into Ray; tuner/ into no library at all
    in_bench = not path.is_relative_to(PACKAGE)
    for n in ast.walk(tree):
        where = f"{path.relative_to(ROOT)}:{getattr(n, 'lineno', 0)}"
        if isinstance(n, ast.ImportFrom) and n.module and n.level == 0:
            top = n.module.split(".")[0]
            if top in ("tuner", "bench", "__future__") or (in_bench and top != "ray"):
                continue
            if any(p.startswith("_") for p in n.module.split(".")) or any(
                a.name.startswith("_") for a in n.names
            ):
                found.append(f"{where} from {n.module} import ...")
        elif isinstance(n, ast.Import):
            found += [
                f"{where} import {a.name}"
                for a in n.names
                if "._" in a.name and a.name.split(".")[0] not in ("tuner", "bench")
            ]
        elif in_bench and not isinstance(n, ast.Constant):
            continue
        elif isinstance(n, ast.Attribute) and private(n.attr):
            found.append(f"{where} .{n.attr}")
        elif isinstance(n, ast.keyword) and n.arg and private(n.arg):
            found.append(f"{where} {n.arg}=")
        elif isinstance(n, ast.Call) and getattr(n.func, "id", None) in ("getattr", "setattr"):
            name = n.args[1] if len(n.args) > 1 else None
            if isinstance(name, ast.Constant) and isinstance(name.value, str):
                if private(name.value):
                    found.append(f"{where} getattr '{name.value}'")
        elif isinstance(n, ast.Constant) and n.value in config_keys:
            found.append(f"{where} RLlib config key '{n.value}'")
    return found


def foreign_overrides(path: Path, tree: ast.Module) -> list[str]:
    """Private methods a class of tuner/ overrides on a base class from outside tuner."""
    found = []
    module = importlib.import_module(module_name(path)) if path.is_relative_to(PACKAGE) else None
    for n in ast.walk(tree):
        if not isinstance(n, ast.ClassDef) or module is None or not hasattr(module, n.name):
            continue
        cls = getattr(module, n.name)
        methods = [
            f.name
            for f in n.body
            if isinstance(f, ast.FunctionDef)
            and f.name.startswith("_")
            and not f.name.startswith("__")
        ]
        for base in inspect.getmro(cls)[1:]:
            if base.__module__.split(".")[0] == "tuner":
                continue
            found += [
                f"{path.relative_to(ROOT)}: {n.name}.{m} overrides {base.__qualname__}"
                for m in methods
                if m in vars(base)
            ]
    return found


def test_no_private_name_of_ray_outside_the_adapter():
    trees = sources()
    own = own_names(trees)
    keys = rllib_private_config_keys()
    offenders = []
    for path, tree in trees.items():
        if path.is_relative_to(ADAPTER):
            continue
        offenders += private_uses(path, tree, own, keys) + foreign_overrides(path, tree)
    assert offenders == []


def test_only_the_adapter_package_is_let_off():
    """The check lets off exactly the adapter's modules, and they do reach into Ray (a
    module moved out of the package would be checked, and caught)."""
    trees = sources()
    adapter = {p for p in trees if p.is_relative_to(ADAPTER)}
    assert (ADAPTER / "__init__.py") in adapter
    assert adapter == set(ADAPTER.rglob("*.py"))
    own, keys = own_names(trees), rllib_private_config_keys()
    for path in ("_learner.py", "_env_runner.py", "_tune.py", "_algorithm.py"):
        moved = PACKAGE / path  # the same code, outside the package
        assert private_uses(moved, trees[ADAPTER / path], own, keys), path


def test_the_private_name_check_sees_each_kind_of_use(tmp_path):
    """A module that reaches into RLlib in each way is caught, each time."""
    source = """
from ray.rllib.algorithms.ppo import PPO
from ray._private import worker
x = config._learner_connector
group.update(batch=b, _no_metrics_reduce=True)
y = getattr(algo, "_module_is_stateful", True)
out = {"_model_config": {}}
"""
    path = PACKAGE / "example.py"
    found = private_uses(path, ast.parse(source), set(), {"_model_config"})
    assert len(found) == 5, found
