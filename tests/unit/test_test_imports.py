"""The house rules of the tests themselves, checked on their source:

- a test imports what users import: a name the package's public face (its __init__'s
  __all__) exports, as the same object, comes from the face, not from the private module
  behind it (tests of private helpers import those from where they live; `import
  tuner.pkg._mod as m` for monkeypatching is not a name import and stays);
- one rule per assert: no `assert a and b`, which hides which condition failed.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Iterator
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]

# no test file is exempt from these rules (#38 item 8); one that must be says why here
EXCLUDED: set[str] = set()


def source_trees() -> Iterator[tuple[str, ast.Module]]:
    for path in sorted(TESTS.rglob("*.py")):
        name = path.relative_to(TESTS).as_posix()
        if name not in EXCLUDED:
            yield name, ast.parse(path.read_text(), filename=str(path))


def face_of(module: str) -> str | None:
    """`tuner.pkg` for `tuner.pkg._mod` (the package in front of the first private part)."""
    parts = module.split(".")
    for i, part in enumerate(parts):
        if part.startswith("_") and not part.endswith("__"):
            return ".".join(parts[:i])
    return None


def exported_by_face(module: str, face: str, name: str) -> bool:
    private = importlib.import_module(module)
    public = importlib.import_module(face)
    if name not in getattr(public, "__all__", ()):
        return False
    return getattr(public, name) is getattr(private, name, object())


def test_tests_import_names_from_the_public_face_that_exports_them():
    found = []
    for name, tree in source_trees():
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
                continue
            if node.module.split(".")[0] != "tuner":
                continue
            face = face_of(node.module)
            if not face:
                continue
            for alias in node.names:
                if exported_by_face(node.module, face, alias.name):
                    found.append(
                        f"tests/{name}:{node.lineno}: from {face} import {alias.name}"
                        f" (not {node.module})"
                    )
    assert not found, "\n".join(found)


def test_face_of_names_the_package_in_front_of_the_private_module():
    assert face_of("tuner.sweep._tuner") == "tuner.sweep"
    assert face_of("tuner.api._routes._experiments") == "tuner.api"
    assert face_of("tuner.sweep") is None
    assert face_of("tuner.sweep.__main__") is None


def test_the_face_rule_finds_a_private_import_of_an_exported_name():
    assert exported_by_face("tuner.sweep._tuner", "tuner.sweep", "trial_params")
    assert not exported_by_face("tuner.spec._safe_input", "tuner.spec", "INT64_MAX")


def test_tests_assert_one_condition_at_a_time():
    found = [
        f"tests/{name}:{node.lineno}"
        for name, tree in source_trees()
        for node in ast.walk(tree)
        if isinstance(node, ast.Assert)
        and isinstance(node.test, ast.BoolOp)
        and isinstance(node.test.op, ast.And)
    ]
    assert not found, "split `assert a and b` into one assert per condition:\n" + "\n".join(found)
