"""Reading tuner's own source in tests: the string constants a module spells."""

from __future__ import annotations

import ast


def strings(tree: ast.Module) -> list[str]:
    """Every string constant of a module but its docstrings (prose): literals, dict keys,
    `Literal[...]` arguments, the constant parts of f-strings."""
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings
    ]
