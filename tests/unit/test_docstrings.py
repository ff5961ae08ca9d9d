"""The public faces' docstrings follow Google style (issue #38 item 7).

Each name in a package face's `__all__` that is a function or class defined in tuner:
the summary on the first line (pydocstyle D212), a blank line after it when more follows
(D205), an `Args:` section naming every parameter, and `Returns:` where the annotation
says it returns something other than None. The same for the public methods of those
classes, except the hooks they override from a third-party base (Tune's callbacks,
pydantic's and Exception's methods: the base documents them) and properties (read as
attributes: summary only). A class's constructor arguments are its `Args:` (a
dataclass's fields may be its `Attributes:`); a pydantic model's fields are described by
their `Field(description=...)`, not asked for here.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest

FACES = [
    "tuner",
    "tuner.algorithms",
    "tuner.api",
    "tuner.cli",
    "tuner.launcher",
    "tuner.rllib",
    "tuner.search_spaces",
    "tuner.spec",
    "tuner.store",
    "tuner.sweep",
    "tuner.tracking",
    "tuner.validation",
    # tuner.trials: old import paths only, no __all__
]

_SECTION = re.compile(r"^(Args|Returns|Yields|Raises|Attributes|Examples?|Notes?):\s*$")
_ARG = re.compile(r"^\s+(\*{0,2}\w+)(?: \([^)]*\))?:")


def _public() -> Iterator[tuple[str, Any]]:
    for face in FACES:
        module = importlib.import_module(face)
        for name in module.__all__:
            obj = inspect.unwrap(getattr(module, name))
            if not (inspect.isfunction(obj) or inspect.isclass(obj)):
                continue  # constants, instances (tuner.cli.app: a Typer app)
            if not getattr(obj, "__module__", "").startswith("tuner"):
                continue  # a third-party object re-exported
            yield f"{face}.{name}", obj


def _third_party_hook(cls: type, name: str) -> bool:
    return any(
        hasattr(base, name) and not base.__module__.startswith("tuner") for base in cls.__mro__[1:]
    )


def _methods(qualname: str, cls: type) -> Iterator[tuple[str, Any]]:
    for name, attr in vars(cls).items():
        if name.startswith("_") or _third_party_hook(cls, name):
            continue
        if isinstance(attr, (classmethod, staticmethod)):
            attr = attr.__func__
        if inspect.isfunction(attr) or isinstance(attr, property):
            yield f"{qualname}.{name}", attr


def _targets() -> list[tuple[str, Any]]:
    found: list[tuple[str, Any]] = []
    for qualname, obj in _public():
        found.append((qualname, obj))
        if inspect.isclass(obj):
            found.extend(_methods(qualname, obj))
    return found


TARGETS = _targets()


def _sections(doc: str) -> dict[str, list[str]]:
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in inspect.cleandoc(doc).splitlines():
        head = _SECTION.match(line)
        if head:
            current = sections.setdefault(head.group(1), [])
        elif current is not None and line and not line[0].isspace():
            current = None  # text after the sections ends them
        elif current is not None:
            current.append(line)
    return sections


def _documented_args(doc: str, section: str = "Args") -> set[str]:
    found = set()
    for line in _sections(doc).get(section, []):
        arg = _ARG.match(line)
        if arg and len(line) - len(line.lstrip()) == 4:
            found.add(arg.group(1).lstrip("*"))
    return found


def _check_summary(qualname: str, doc: str | None) -> None:
    assert doc, f"{qualname}: no docstring"
    assert doc.strip(), f"{qualname}: no docstring"
    lines = doc.splitlines()
    assert lines[0].strip(), f"{qualname}: the summary must be the docstring's first line (D212)"
    if len(lines) > 1:
        assert not lines[1].strip(), (
            f"{qualname}: the summary is one line, then a blank line (D205): {lines[1]!r}"
        )


def _params(func: Callable[..., Any]) -> tuple[list[str], Any]:
    signature = inspect.signature(func)
    names = [p for p in signature.parameters if p not in ("self", "cls")]
    return names, signature.return_annotation


def _check_callable(qualname: str, func: Callable[..., Any], doc: str) -> None:
    params, returns = _params(func)
    missing = [p for p in params if p not in _documented_args(doc)]
    assert not missing, f"{qualname}: `Args:` does not name {', '.join(missing)}"
    if returns not in (inspect.Signature.empty, None, "None"):
        sections = _sections(doc)
        assert "Returns" in sections or "Yields" in sections, (
            f"{qualname}: returns {returns} but has no `Returns:` section"
        )


@pytest.mark.parametrize(("qualname", "obj"), TARGETS, ids=[t[0] for t in TARGETS])
def test_public_docstring(qualname: str, obj: Any) -> None:
    if isinstance(obj, property):
        _check_summary(qualname, obj.fget.__doc__)
        return
    _check_summary(qualname, obj.__doc__)
    if inspect.isfunction(obj):
        _check_callable(qualname, obj, obj.__doc__)
    elif "__init__" in vars(obj) and inspect.isfunction(vars(obj)["__init__"]):
        # a constructor: its arguments in the class's docstring (a dataclass's fields
        # may be its `Attributes:`) or in the constructor's own
        params, _ = _params(vars(obj)["__init__"])
        documented = _documented_args(obj.__doc__) | _documented_args(
            vars(obj)["__init__"].__doc__ or ""
        )
        if dataclasses.is_dataclass(obj):
            documented |= _documented_args(obj.__doc__, "Attributes")
        missing = [p for p in params if p not in documented]
        assert not missing, f"{qualname}: `Args:` does not name {', '.join(missing)}"


def test_the_faces_have_names_to_check() -> None:
    assert len(TARGETS) > 100
