"""The docs as references that cannot drift from the code: README.md stays a short front
door, docs/spec.md has an entry for every field of the spec's model (with the model's
default and an example that validates) and for nothing else, and docs/api.md lists every
method and path of the OpenAPI document and nothing else."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_args, get_origin

import pytest
import yaml
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from tuner.api import create_app
from tuner.settings import Settings
from tuner.spec import ExperimentSpec

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
SPEC_DOC = REPO / "docs" / "spec.md"
API_DOC = REPO / "docs" / "api.md"
README_MAX_LINES = 150

# docs/spec.md: one `### `dotted.path`` heading per field, then `- Default: ...` and
# `- Example: `<YAML of a spec>``; a mapping's values are `<key>` in the path.
FIELD_HEADING = re.compile(r"^### `([^`]+)`\s*$")
DEFAULT_LINE = re.compile(r"^- Default: (.*)$")
EXAMPLE_LINE = re.compile(r"^- Example: `(.*)`\s*$")
FIRST_LITERAL = re.compile(r"^`([^`]*)`")
KEY = "<key>"
# What an example is merged onto: the fields a spec needs.
EXAMPLE_BASE = {"name": "docs-example", "algorithm": "PPO", "env": "CartPole-v1"}
# docs/api.md: one table row per operation, `| `METHOD` | `/path` | ...`.
API_ROW = re.compile(r"^\| `([A-Z]+)` \| `(/[^`]*)` \|", re.M)
HTTP_METHODS = {"get", "put", "post", "delete", "patch", "head", "options", "trace"}


# --- the spec's model -----------------------------------------------------------------


def _nested(annotation: Any, step: str = ".") -> Iterator[tuple[type[BaseModel], str]]:
    """The models inside a field's annotation, each with how a path steps into it: `.` into
    a model, an optional one or each item of a list, `.<key>.` into each value of a
    mapping."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation, step
        return
    args = get_args(annotation)
    if get_origin(annotation) is dict:
        yield from _nested(args[1], f".{KEY}.")
        return
    for arg in args:
        yield from _nested(arg, step)


def schema_fields(
    model: type[BaseModel] = ExperimentSpec, prefix: str = ""
) -> dict[str, FieldInfo]:
    """Every field of the spec, by its dotted path as a spec writes it (aliases: `from`)."""
    fields: dict[str, FieldInfo] = {}
    for name, info in model.model_fields.items():
        path = prefix + (info.alias or name)
        fields[path] = info
        for inner, step in _nested(info.annotation):
            fields.update(schema_fields(inner, path + step))
    return fields


def _model_default(info: FieldInfo) -> Any:
    if info.default_factory is not None:
        return info.default_factory()
    return info.default


def _simple(value: Any) -> bool:
    """A default the doc can write as a YAML literal: null, a bool, number or string, or a
    list or mapping of them (a section's default, a model instance, is not)."""
    if value is None or isinstance(value, bool | int | float | str):
        return True
    if isinstance(value, list):
        return all(_simple(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _simple(v) for k, v in value.items())
    return False


def _same(written: Any, held: Any) -> bool:
    """Equal as YAML values: 1 and 1.0 are the same number, but false is not 0."""
    if isinstance(written, bool) or isinstance(held, bool):
        return type(written) is type(held) and written == held
    if isinstance(written, list) and isinstance(held, list):
        return len(written) == len(held) and all(map(_same, written, held))
    if isinstance(written, dict) and isinstance(held, dict):
        return written.keys() == held.keys() and all(_same(written[k], held[k]) for k in held)
    return written == held


# --- docs/spec.md -----------------------------------------------------------------------


def field_entries() -> list[tuple[str, list[str]]]:
    """Each field heading of docs/spec.md with the lines of its entry, in order (headings
    inside fenced code are YAML comments, not headings)."""
    entries: list[tuple[str, list[str]]] = []
    current: list[str] | None = None
    fenced = False
    for line in SPEC_DOC.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
        if not fenced and line.startswith("#"):
            match = FIELD_HEADING.match(line)
            current = [] if match else None
            if match:
                entries.append((match.group(1), current))
            continue
        if current is not None:
            current.append(line)
    return entries


def _first(lines: list[str], pattern: re.Pattern[str]) -> re.Match[str] | None:
    return next((m for line in lines if (m := pattern.match(line))), None)


def _defaults_written() -> dict[str, str]:
    out = {}
    for name, lines in field_entries():
        found = _first(lines, DEFAULT_LINE)
        if found:
            out[name] = found.group(1).strip()
    return out


def _examples_written() -> dict[str, str]:
    out = {}
    for name, lines in field_entries():
        found = _first(lines, EXAMPLE_LINE)
        if found:
            out[name] = found.group(1)
    return out


def _sets(data: Any, parts: list[str]) -> bool:
    """Whether `data` (a spec as YAML loads it) sets the field at `parts`: a mapping by the
    key (any key for `<key>`), a list in any of its items."""
    if not parts:
        return True
    if isinstance(data, list):
        return any(_sets(item, parts) for item in data)
    if not isinstance(data, dict):
        return False
    head, rest = parts[0], parts[1:]
    if head == KEY:
        return any(_sets(value, rest) for value in data.values())
    return head in data and _sets(data[head], rest)


def test_readme_is_at_most_150_lines():
    lines = len(README.read_text().splitlines())
    assert lines <= README_MAX_LINES, (
        f"README.md has {lines} lines, more than {README_MAX_LINES}: move the reference to docs/"
    )


def test_the_spec_doc_has_an_entry_for_every_field_of_the_model():
    documented = {name for name, _ in field_entries()}
    missing = sorted(set(schema_fields()) - documented)
    assert not missing, f"docs/spec.md has no ### `field` entry for {missing}"


def test_the_spec_doc_names_no_field_the_model_lacks():
    unknown = sorted({name for name, _ in field_entries()} - set(schema_fields()))
    assert not unknown, f"docs/spec.md documents fields the spec's model lacks: {unknown}"


def test_the_spec_doc_has_one_entry_per_field():
    names = [name for name, _ in field_entries()]
    twice = sorted({n for n in names if names.count(n) > 1})
    assert not twice, f"docs/spec.md has more than one entry for {twice}"


def test_every_field_entry_says_its_default():
    written = _defaults_written()
    missing = [name for name, _ in field_entries() if name not in written]
    assert not missing, f"docs/spec.md: no '- Default: ...' line under {missing}"


def test_every_required_field_is_written_as_required():
    written = _defaults_written()
    wrong = {
        path: written[path]
        for path, info in schema_fields().items()
        if info.is_required() and path in written and not written[path].startswith("required")
    }
    assert not wrong, f"docs/spec.md: these fields are required, not defaulted: {wrong}"


def test_every_written_default_is_the_models():
    written = _defaults_written()
    wrong = {}
    for path, info in schema_fields().items():
        if info.is_required() or path not in written:
            continue
        held = _model_default(info)
        if not _simple(held):
            continue
        literal = FIRST_LITERAL.match(written[path])
        if literal is None:
            wrong[path] = f"no `literal` written; the model's default is {held!r}"
            continue
        value = yaml.safe_load(literal.group(1))
        if not _same(value, held):
            wrong[path] = f"docs say {value!r}, the model's default is {held!r}"
    assert not wrong, f"docs/spec.md: defaults that are not the model's: {wrong}"


def test_every_field_entry_has_an_example():
    written = _examples_written()
    missing = [name for name, _ in field_entries() if name not in written]
    assert not missing, f"docs/spec.md: no '- Example: `...`' line under {missing}"


def test_every_example_sets_its_field():
    wrong = []
    for name, example in _examples_written().items():
        data = yaml.safe_load(example)
        if not _sets(data, name.split(".")):
            wrong.append(f"{name}: {example}")
    assert not wrong, f"docs/spec.md: examples that do not set their field: {wrong}"


def test_every_example_is_a_valid_spec():
    wrong = []
    for name, example in _examples_written().items():
        data = yaml.safe_load(example)
        try:
            ExperimentSpec.model_validate({**EXAMPLE_BASE, **data})
        except (ValidationError, TypeError) as err:
            wrong.append(f"{name}: {example}: {err}")
    assert not wrong, "docs/spec.md: examples the spec's model refuses:\n" + "\n".join(wrong)


# --- docs/api.md ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def openapi_operations(tmp_path_factory) -> set[tuple[str, str]]:
    app = create_app(Settings(data_dir=tmp_path_factory.mktemp("docs-openapi")))
    return {
        (method.upper(), path)
        for path, item in app.openapi()["paths"].items()
        for method in item
        if method in HTTP_METHODS
    }


def _api_rows() -> set[tuple[str, str]]:
    return set(API_ROW.findall(API_DOC.read_text()))


def test_the_api_doc_lists_every_operation(openapi_operations):
    missing = sorted(openapi_operations - _api_rows())
    assert not missing, f"docs/api.md has no table row for {missing}"


def test_the_api_doc_lists_no_operation_that_does_not_exist(openapi_operations):
    unknown = sorted(_api_rows() - openapi_operations)
    assert not unknown, f"docs/api.md lists operations the OpenAPI document lacks: {unknown}"
