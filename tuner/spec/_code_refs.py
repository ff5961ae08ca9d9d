"""A spec is data: the RLlib settings whose values RLlib turns into classes or callables.

RLlib imports, parses and calls some config strings: `{type: subprocess.Popen, _args:
[[touch, x]]}` as a replay buffer `type` starts a process, `callbacks: os.abort` kills the
process that builds the config. Wherever that happens (listed, with their RLlib sources, in
tuner/spec/rllib_classes.yaml) a spec may give only one of RLlib's own classes by its short name
from that file, or an import path "package.module:Name" under a module prefix the operator
allows (TUNER_ALLOWED_MODULES, `--allow-module`). A few settings that run code without
naming it (`extra_python_environs_for_worker`: environment variables) are refused outright.
Ordinary settings (`lr`, `fcnet_activation: relu`, ...) are not affected.

    check_code_refs(config, loc="config", allowed_modules=[...])   -> list[SpecIssue]
    check_space_code_refs(space, allowed_modules=[...])             -> list[SpecIssue]
    module_allowed("pkg.mod:Name", ["pkg"])                         -> True
    import_paths(config, model, space=space)                        -> ["pkg.mod:Name", ...]
    resolve_code_refs(config, allowed_modules=[...])                -> config, paths imported
    resolve_paths(config, ["pkg.mod:Name"])                         -> config, those imported

The checks import nothing a spec names; only the resolve functions import, and they are
meant for each trial's process after the spec has been checked: the driver hands the trials
the paths the checked spec names (`import_paths`), a trial imports them (`resolve_paths`)
before RLlib sees its config.
"""

from __future__ import annotations

import copy
import importlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from tuner.data_files import load_data_file
from tuner.spec._errors import SpecError, SpecIssue
from tuner.spec._sections import GYM_ID_RE, IMPORT_PATH_RE

_CLASSES_FILE = Path(__file__).with_name("rllib_classes.yaml")
_MODULE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
# A gymnasium id as RLlib can take it: a dot would make RLlib import it as "module.Name".
_DOMAIN_KINDS = ("grid", "choice", "uniform", "loguniform", "randint", "quniform")
_MAX_DEPTH = 64
_ALLOW_HINT = "the operator allows modules with TUNER_ALLOWED_MODULES or --allow-module"


@dataclass(frozen=True)
class _Rules:
    type_families: dict[str, str]
    type_names: dict[str, tuple[str, ...]]
    code_keys: dict[str, tuple[str, ...]]
    suffixes: tuple[str, ...]
    prefixes: tuple[str, ...]
    env_keys: frozenset[str]
    data_keys: frozenset[str]
    refused_keys: dict[str, str]

    def code_names(self, key: str) -> tuple[str, ...] | None:
        """The short names a code key accepts, or None if `key` is not a code key."""
        if key in self.code_keys:
            return self.code_keys[key]
        if key.endswith(self.suffixes) or key.startswith(self.prefixes):
            return ()
        return None

    def type_family(self, parent: str | None) -> tuple[str, tuple[str, ...]]:
        """(description, names) a `type` under `parent` accepts."""
        family = self.type_families.get(parent or "")
        if family:
            return f"RLlib's {family.replace('_', ' ')}", self.type_names[family]
        every = tuple(n for names in self.type_names.values() for n in names)
        return "RLlib's replay buffers, explorations or schedules", every


_STRICT = ConfigDict(extra="forbid", frozen=True, strict=True)


class TypeNames(BaseModel):
    """RLlib's own classes a `type` may name, by family."""

    model_config = _STRICT

    replay_buffers: list[str] = Field(min_length=1)
    explorations: list[str] = Field(min_length=1)
    schedules: list[str] = Field(min_length=1)


class RllibClassesFile(BaseModel):
    """rllib_classes.yaml: which RLlib settings name code, and which of RLlib's own
    classes a spec may name there (the file says why each entry is there)."""

    model_config = _STRICT

    type_families: dict[str, str] = Field(
        description="Parent key -> the family of type_names a `type` under it takes."
    )
    type_names: TypeNames
    code_keys: dict[str, list[str]] = Field(
        description="Code key -> the short names it accepts besides allowed import paths."
    )
    code_key_suffixes: list[str]
    code_key_prefixes: list[str]
    env_keys: list[str]
    refused_keys: dict[str, str] = Field(description="Key a spec may not give -> why.")
    data_keys: list[str]

    @model_validator(mode="after")
    def _families_exist(self) -> RllibClassesFile:
        families = TypeNames.model_fields
        unknown = {k: v for k, v in self.type_families.items() if v not in families}
        if unknown:
            raise ValueError(
                f"type_families names no family of type_names ({', '.join(families)}): {unknown}"
            )
        return self


@cache
def _rules(path: Path = _CLASSES_FILE) -> _Rules:
    data = load_data_file(path, RllibClassesFile)
    return _Rules(
        type_families=dict(data.type_families),
        type_names={k: tuple(v) for k, v in data.type_names.model_dump().items()},
        code_keys={k: tuple(v) for k, v in data.code_keys.items()},
        suffixes=tuple(data.code_key_suffixes),
        prefixes=tuple(data.code_key_prefixes),
        env_keys=frozenset(data.env_keys),
        data_keys=frozenset(data.data_keys),
        refused_keys={k: " ".join(v.split()) for k, v in data.refused_keys.items()},
    )


def module_allowed(path: str, allowed: Sequence[str]) -> bool:
    """Whether the module of `path` lies under one of the `allowed` module prefixes.

    Compared whole component by component: "mypkg" allows "mypkg" and "mypkg.sub", never
    "mypkgx". Nothing is imported.

    Args:
        path: An import path, "pkg.mod:Name" or "pkg.mod".
        allowed: The allowed module prefixes.

    Returns:
        True where it is allowed.
    """
    module = path.partition(":")[0]
    if not _MODULE_RE.fullmatch(module):
        return False
    for prefix in allowed:
        prefix = prefix.strip()
        if _MODULE_RE.fullmatch(prefix) and (module == prefix or module.startswith(prefix + ".")):
            return True
    return False


def _allowed_note(allowed: Sequence[str], value: Any = None) -> str:
    shown = ", ".join(m for m in allowed if m.strip())
    if not shown:
        named = value.partition(":")[0].split(".")[0] if isinstance(value, str) else ""
        module = named if ":" in str(value) and _MODULE_RE.fullmatch(named) else "<module>"
        return (
            f"this service imports no user code (set TUNER_ALLOWED_MODULES={module}; "
            f"`tuner run --allow-module {module}`)"
        )
    return f"allowed modules: {shown}; {_ALLOW_HINT}"


def _import_path_ok(value: str, allowed: Sequence[str]) -> bool:
    return bool(IMPORT_PATH_RE.fullmatch(value)) and module_allowed(value, allowed)


def _dotted_hint(value: str, allowed: Sequence[str]) -> str:
    module, _, name = value.rpartition(".")
    if _MODULE_RE.fullmatch(value) and module and module_allowed(module, allowed):
        return f" (write it as '{module}:{name}')"
    return ""


def _shown(value: Any) -> Any:
    """`value` for an issue: JSON data as is (short), anything else as its repr."""
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return repr(value)[:200]


class _Walker:
    """Walks config data; collects issues, or (resolve=True) returns a copy in which every
    allowed import path at a code position is replaced by the imported object."""

    def __init__(self, allowed: Sequence[str], resolve: Callable[[str], Any] | None = None) -> None:
        self.allowed = [m for m in allowed if m.strip()]
        self.rules = _rules()
        self.issues: list[SpecIssue] = []
        self.resolve = resolve
        self.paths: set[str] = set()  # every import path seen at a code position

    def _refuse(self, loc: str, value: Any, msg: str) -> Any:
        self.issues.append(SpecIssue(loc=loc, value=value, msg=msg))
        return value

    def data(self, value: Any, loc: str, parent: str | None, depth: int) -> Any:
        """An ordinary setting: only code positions inside it are checked."""
        if depth > _MAX_DEPTH:
            return self._refuse(loc, None, f"nested deeper than {_MAX_DEPTH} levels")
        if isinstance(value, Mapping):
            out = {}
            for k, v in value.items():
                key = str(k)
                out[k] = self.entry(key, v, f"{loc}.{key}" if loc else key, parent, depth + 1)
            return out
        if isinstance(value, (list, tuple)):
            return [self.data(v, f"{loc}.{i}", parent, depth + 1) for i, v in enumerate(value)]
        return value

    def entry(self, key: str, value: Any, loc: str, parent: str | None, depth: int) -> Any:
        rules = self.rules
        if key in rules.refused_keys and value not in (None, {}):  # RLlib's default: {}
            return self._refuse(loc, _shown(value), rules.refused_keys[key])
        if key in rules.data_keys:
            return value
        if key in rules.env_keys:
            return self.env(value, loc)
        if key == "type":
            what, names = rules.type_family(parent)
            return self.ref(value, loc, names, what, depth, class_of_type=True)
        names = rules.code_names(key)
        if names is not None:
            what = f"`{key}` is code RLlib calls"
            return self.ref(value, loc, names, what, depth)
        return self.data(value, loc, key, depth)

    def ref(
        self,
        value: Any,
        loc: str,
        names: tuple[str, ...],
        what: str,
        depth: int,
        class_of_type: bool = False,
    ) -> Any:
        """A code position: every string in `value` must be a listed name or an allowed
        import path."""
        if depth > _MAX_DEPTH:
            return self._refuse(loc, None, f"nested deeper than {_MAX_DEPTH} levels")
        if value is None or isinstance(value, (bool, int, float)) or callable(value):
            return value  # a class or function can only come from Python code, not a spec
        if isinstance(value, str):
            if value in names:
                return value
            if IMPORT_PATH_RE.fullmatch(value):
                self.paths.add(value)
            if _import_path_ok(value, self.allowed):
                return self.resolve(value) if self.resolve else value
            listed = ", ".join(names)
            head, choices = what, f"one of {listed} or " if names else ""
            if class_of_type:  # `what` names the family, e.g. "RLlib's replay buffers"
                head = "`type` here is a class RLlib builds"
                choices = f"one of {what} ({listed}) or "
            return self._refuse(
                loc,
                value,
                f"{head}: use {choices}an import path 'package.module:Name' under an allowed "
                f"module{_dotted_hint(value, self.allowed)} ({_allowed_note(self.allowed, value)})",
            )
        if class_of_type:
            return self._refuse(loc, _shown(value), "`type` is one class name, not a collection")
        if isinstance(value, Mapping):
            out = {}
            for k, v in value.items():
                key = str(k)
                out[k] = self.ref(v, f"{loc}.{key}", names, what, depth + 1, class_of_type)
            return out
        if isinstance(value, (list, tuple)):
            return [
                self.ref(v, f"{loc}.{i}", names, what, depth + 1, class_of_type)
                for i, v in enumerate(value)
            ]
        return self._refuse(loc, _shown(value), f"{what}: not a name or import path")

    def env(self, value: Any, loc: str) -> Any:
        if value is None:
            return value
        if isinstance(value, str):
            if ":" in value:
                if _import_path_ok(value, self.allowed):
                    return value
            elif GYM_ID_RE.fullmatch(value):
                return value
        return self._refuse(
            loc,
            _shown(value),
            "an env is a gymnasium id such as 'CartPole-v1' (RLlib imports any dotted "
            "name) or an import path 'package.module:Name' under an allowed module "
            f"({_allowed_note(self.allowed, value)})",
        )


def check_code_refs(
    config: Mapping[str, Any], *, loc: str, allowed_modules: Sequence[str]
) -> list[SpecIssue]:
    """Issues for every value in `config` that names code RLlib may not run.

    Every value (RLlib settings, nested dicts and lists walked) that RLlib would turn into
    code and that is neither one of RLlib's own classes listed in
    tuner/spec/rllib_classes.yaml nor an import path under `allowed_modules`. Imports
    nothing.

    Args:
        config: RLlib settings.
        loc: Where `config` is in the spec; each issue's loc is the dotted path under it
            (e.g. "config.replay_buffer_config.type").
        allowed_modules: The allowed module prefixes.

    Returns:
        The issues; [] where none.
    """
    walker = _Walker(allowed_modules)
    walker.data(config, loc, None, 0)
    return walker.issues


def _domain_values(dom: Any) -> list[Any]:
    """Every value a search-space entry can take (a tuner Domain, a {kind: args} mapping
    as written in a spec, or a plain value)."""
    kind, args = getattr(dom, "kind", None), getattr(dom, "args", None)
    if kind is None and isinstance(dom, Mapping) and len(dom) == 1:
        only = next(iter(dom))
        if only in _DOMAIN_KINDS:
            kind, args = only, dom[only]
    if kind is None:
        return [dom]
    return list(args) if isinstance(args, (list, tuple)) else [args]


def _walk_space(walker: _Walker, space: Mapping[str, Any], loc: str) -> None:
    for key, dom in space.items():
        parts = str(key).split(".")
        for value in _domain_values(dom):
            nested: Any = value
            for part in reversed(parts):
                nested = {part: nested}
            walker.data(nested, loc, None, 0)


def check_space_code_refs(
    space: Mapping[str, Any], *, allowed_modules: Sequence[str], loc: str = "search.space"
) -> list[SpecIssue]:
    """The rule of `check_code_refs` for a search space.

    Each key ("callbacks", "replay_buffer_config", "model.<key>", ...) is checked with
    every value its domain can take (each grid/choice value; dicts and lists inside them
    walked). A dotted key is read as the nested setting it names. Imports nothing.

    Args:
        space: The search space as written.
        allowed_modules: The allowed module prefixes.
        loc: Where the space is in the spec; issues are located at
            `<loc>.<key>[.<path inside>]`.

    Returns:
        The issues; [] where none.
    """
    walker = _Walker(allowed_modules)
    _walk_space(walker, space, loc)
    # one issue per place and value, even when a value repeats across grid/choice lists
    seen: set[tuple[str, str]] = set()
    out = []
    for issue in walker.issues:
        mark = (issue.loc, repr(issue.value))
        if mark not in seen:
            seen.add(mark)
            out.append(issue)
    return out


def _load(path: str) -> Any:
    module_name, _, attr = path.partition(":")
    return getattr(importlib.import_module(module_name), attr)


def resolve_code_refs(
    config: Mapping[str, Any], *, allowed_modules: Sequence[str], loc: str = "config"
) -> dict[str, Any]:
    """A copy of `config` with each import path at a code position replaced by its object.

    So RLlib gets a class or function rather than a string it would resolve itself. For
    the driver and trials only: it imports user modules.

    Args:
        config: RLlib settings.
        allowed_modules: The allowed module prefixes.
        loc: Where `config` is in the spec (for the issues).

    Returns:
        The copy.

    Raises:
        SpecError: (as check_code_refs) before importing anything if a value is refused.
    """
    issues = check_code_refs(config, loc=loc, allowed_modules=allowed_modules)
    if issues:
        raise SpecError(issues)
    walker = _Walker(allowed_modules, resolve=_load)
    return walker.data(copy.deepcopy(dict(config)), loc, None, 0)


def import_paths(*configs: Mapping[str, Any], space: Mapping[str, Any] | None = None) -> list[str]:
    """Every import path "package.module:Name" named at a code position.

    In the RLlib settings in `configs` (and every value each `space` entry can take),
    whether or not its module is allowed (envs are not code positions). Imports nothing:
    for the driver, to tell its trials what to import once the checks passed.

    Args:
        *configs: RLlib settings.
        space: A search space as written.

    Returns:
        The import paths, sorted.
    """
    walker = _Walker([])
    for config in configs:
        walker.data(config, "", None, 0)
    if space:
        _walk_space(walker, space, "")
    return sorted(walker.paths)


def _names_one(value: Any, paths: frozenset[str], depth: int = 0) -> bool:
    if isinstance(value, str):
        return value in paths
    if depth > _MAX_DEPTH:
        return False
    if isinstance(value, Mapping):
        return any(_names_one(v, paths, depth + 1) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_names_one(v, paths, depth + 1) for v in value)
    return False


def resolve_paths(config: Mapping[str, Any], paths: Sequence[str]) -> dict[str, Any]:
    """A copy of `config` with each of `paths` at a code position replaced by its object.

    Every other value stays as it is (only the top-level entries that hold one of `paths`
    are rebuilt, as plain dicts and lists). For a trial's process: it imports those
    modules, which the driver checked against the allowed modules (`import_paths` of the
    checked spec).

    Args:
        config: RLlib settings, e.g. a trial's config dict.
        paths: The import paths to resolve.

    Returns:
        The copy.
    """
    wanted = frozenset(paths)
    modules = sorted({p.partition(":")[0] for p in wanted})
    walker = _Walker(modules, resolve=lambda path: _load(path) if path in wanted else path)
    out = dict(config)
    for key, value in config.items():
        if _names_one(value, wanted):
            out[key] = walker.entry(str(key), value, str(key), None, 1)
    return out


__all__ = [
    "check_code_refs",
    "check_space_code_refs",
    "import_paths",
    "module_allowed",
    "resolve_code_refs",
    "resolve_paths",
]
