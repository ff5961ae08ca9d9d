"""Strict parsing of request bodies and spec files: hostile input is a SpecError naming
the place, never a crash, a hang or a silently changed value.

    load_yaml_strict(text)   YAML without tags, anchors, aliases or duplicate keys
    load_json_strict(text)   JSON without NaN/Infinity literals or duplicate keys
    check_data(data)         ints within int64, finite floats, string keys, JSON types only

Both loaders refuse nesting deeper than `max_depth` before building anything (so a
100000-deep `[[[[...` costs a scan, not a RecursionError) with `NestingTooDeep`, a
SpecError the API can answer with 413. Dates in YAML stay strings, as in JSON; numbers
read as in YAML 1.2 and JSON (`1e6`, `1.0e6` and `1.0e+6` are all the float 1000000.0).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterator
from typing import Any

import yaml

from tuner.spec._errors import SpecError, SpecIssue

BODY = "(body)"
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
_MAX_ISSUES = 100
_YAML_STD = "tag:yaml.org,2002:"
# a JSON string literal, possessive so that a hostile body cannot make it backtrack
_JSON_STRING = re.compile(r'"(?:[^"\\]++|\\.)*+"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


class NestingTooDeep(SpecError):
    """Input nested deeper than the limit; nothing of it was built."""


def _where(mark: Any) -> str:
    return f"line {mark.line + 1}, column {mark.column + 1}"


def _body_error(msg: str, value: Any = None) -> SpecError:
    return SpecError([SpecIssue(loc=BODY, msg=msg, value=value)])


def _too_deep(max_depth: int, where: str = "") -> NestingTooDeep:
    at = f" (at {where})" if where else ""
    return NestingTooDeep(
        [SpecIssue(loc=BODY, msg=f"nested deeper than {max_depth} levels{at}", value=None)]
    )


_BaseLoader: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _StrictLoader(_BaseLoader):  # type: ignore[misc, valid-type]
    """SafeLoader that refuses duplicate keys and reads timestamps as strings."""

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        seen: set[tuple[str, str]] = set()
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode):
                ident = (key_node.tag, key_node.value)
                if ident in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"duplicate key {key_node.value!r}", key_node.start_mark
                    )
                seen.add(ident)
        return super().construct_mapping(node, deep=deep)


_StrictLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != _YAML_STD + "timestamp"]
    for first, resolvers in _BaseLoader.yaml_implicit_resolvers.items()
}
# YAML 1.1 (PyYAML) reads `1e6` and `1.0e6` as strings: its floats need a dot and a signed
# exponent. People write them as YAML 1.2 and JSON read them, as numbers; a string there
# passed the schema of `config` and failed in every trial. Appended after YAML 1.1's own
# int and float forms, so what they read stays as they read it; the float constructor
# reads the rest as Python's float() does (an exponent past a float is inf: refused by
# check_data like any non-finite number).
_EXPONENT_FLOAT = re.compile(
    r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9][0-9_]*)"  # digits, with or without a dot
    r"[eE][-+]?[0-9]+$"  # the exponent, its sign optional
)
_StrictLoader.add_implicit_resolver(_YAML_STD + "float", _EXPONENT_FLOAT, list("-+.0123456789"))


def _first_clause(err: Exception) -> str:
    return str(err).split(";")[0][:300]


def _show_tag(tag: str) -> str:
    return "!!" + tag[len(_YAML_STD) :] if tag.startswith(_YAML_STD) else tag


def load_yaml_strict(text: str, *, max_depth: int = 32) -> Any:
    """Parses YAML restricted to plain data.

    Every explicit tag (`!!binary`, `!!python/...`, `!!set`, `!foo`, even `!!str`), every
    anchor (&a) and alias (*a), a duplicate key and nesting deeper than `max_depth`
    collections is refused, naming the line and column. Timestamps stay strings.

    Args:
        text: The YAML text.
        max_depth: The deepest nesting of collections allowed.

    Returns:
        The data.

    Raises:
        NestingTooDeep: For depth.
        SpecError: For the rest.
    """
    depth = 0
    try:
        for event in yaml.parse(text, Loader=_StrictLoader):
            if isinstance(event, yaml.AliasEvent):
                raise _body_error(
                    f"YAML aliases (*{event.anchor}) are not accepted ({_where(event.start_mark)})"
                )
            anchor = getattr(event, "anchor", None)
            if anchor is not None:
                raise _body_error(
                    f"YAML anchors (&{anchor}) are not accepted ({_where(event.start_mark)})"
                )
            tag = getattr(event, "tag", None)
            if tag is not None:
                raise _body_error(
                    f"YAML tags are not accepted: {_show_tag(tag)} at "
                    f"{_where(event.start_mark)}; write plain data",
                    _show_tag(tag),
                )
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                depth += 1
                if depth > max_depth:
                    raise _too_deep(max_depth, _where(event.start_mark))
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                depth -= 1
        return yaml.load(text, Loader=_StrictLoader)  # a SafeLoader subclass
    except SpecError:
        raise
    except yaml.MarkedYAMLError as err:
        if "nesting depth" in str(err.problem):
            # libyaml >= 0.2.6 (PyYAML 6.0.4's wheels) has a nesting limit of its own; its
            # scanner reads ahead, so it can stop the input before our count reaches max_depth.
            raise _too_deep(max_depth) from None
        what = ", ".join(p for p in (err.context, err.problem) if p)
        where = f" ({_where(err.problem_mark)})" if err.problem_mark else ""
        raise _body_error(f"not valid YAML: {what}{where}") from None
    except (yaml.YAMLError, ValueError) as err:  # ValueError: an int of over 4300 digits
        raise _body_error(f"not valid YAML: {_first_clause(err)}") from None


class _NonFinite:
    def __init__(self, literal: str) -> None:
        self.literal = literal


def _json_depth_ok(text: str, max_depth: int) -> None:
    brackets = _NOT_BRACKET.sub("", _JSON_STRING.sub("", text))
    depth = 0
    for ch in brackets:
        if ch in "[{":
            depth += 1
            if depth > max_depth:
                raise _too_deep(max_depth)
        else:
            depth -= 1


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _body_error(f"duplicate key {key!r} in a JSON object", key)
        out[key] = value
    return out


def load_json_strict(text: str, *, max_depth: int = 32) -> Any:
    """Parses JSON, refusing what a spec must not hold.

    NaN, Infinity and -Infinity literals (naming where they are), duplicate keys and
    nesting deeper than `max_depth` are refused. Depth is measured by a scan before
    parsing, so any depth fails fast.

    Args:
        text: The JSON text.
        max_depth: The deepest nesting of collections allowed.

    Returns:
        The data.

    Raises:
        NestingTooDeep: For depth.
        SpecError: Else.
    """
    _json_depth_ok(text, max_depth)
    found: list[_NonFinite] = []

    def constant(literal: str) -> _NonFinite:
        found.append(_NonFinite(literal))
        return found[-1]

    try:
        data = json.loads(text, parse_constant=constant, object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as err:
        raise _body_error(
            f"not valid JSON: {err.msg} (line {err.lineno}, column {err.colno})"
        ) from None
    except SpecError:
        raise
    except (ValueError, RecursionError) as err:  # ValueError: an int of over 4300 digits
        raise _body_error(f"not valid JSON: {_first_clause(err)}") from None
    if found:
        issues = [
            SpecIssue(
                loc=path(),
                value=value.literal,
                msg=f"{value.literal} is not a number JSON allows; use a finite number",
            )
            for path, value in _walk(data, "")
            if isinstance(value, _NonFinite)
        ]
        raise SpecError(issues[:_MAX_ISSUES])
    return data


_Trail = tuple  # (parent trail or None, key): a path built only when it is reported


def _path(loc: str, trail: _Trail | None) -> str:
    keys = []
    while trail is not None:
        trail, key = trail
        keys.append(str(key))
    return ".".join(([loc] if loc else []) + keys[::-1]) or BODY


def _walk(data: Any, loc: str) -> Iterator[tuple[Callable[[], str], Any]]:
    """(path getter, value) of every value in `data`, containers included, without
    recursion; each container is visited once."""
    stack: list[tuple[_Trail | None, Any]] = [(None, data)]
    seen: set[int] = set()
    while stack:
        trail, value = stack.pop()
        yield (lambda t=trail: _path(loc, t)), value
        if isinstance(value, (dict, list, tuple)):
            if id(value) in seen:
                continue
            seen.add(id(value))
            items = value.items() if isinstance(value, dict) else enumerate(value)
            stack.extend(reversed([((trail, k), v) for k, v in items]))


def check_data(data: Any, *, loc: str = "") -> list[SpecIssue]:
    """Issues for every value a spec must not hold.

    An int outside int64, a NaN or infinite float, a non-string dict key, or anything
    other than dict, list, str, int, float, bool and None (YAML sets, bytes, ...).

    Args:
        data: The parsed spec.
        loc: Where `data` is; each issue is at its dotted path under it.

    Returns:
        The issues, at most 100.
    """
    issues: list[SpecIssue] = []
    for path, value in _walk(data, loc):
        problem, shown = _problem(value)
        if problem is None:
            continue
        if len(issues) >= _MAX_ISSUES:
            issues.append(SpecIssue(loc=path(), msg="more problems not shown", value=None))
            break
        if isinstance(value, dict):  # a non-string key: name it under its mapping
            where = path()
            issues.append(
                SpecIssue(
                    loc=f"{where}.{shown}" if where != BODY else str(shown),
                    value=shown,
                    msg=problem,
                )
            )
        else:
            issues.append(SpecIssue(loc=path(), value=shown, msg=problem))
    return issues


def _problem(value: Any) -> tuple[str | None, Any]:
    """(what is wrong with `value` itself, how to show it); (None, None) if nothing."""
    if value is None or isinstance(value, (bool, str, list, tuple)):
        return None, None
    if isinstance(value, dict):
        bad = next((k for k in value if not isinstance(k, str)), None)
        if bad is None and all(isinstance(k, str) for k in value):
            return None, None
        return f"keys must be strings, got {type(bad).__name__}", repr(bad)[:100]
    if isinstance(value, int):
        if INT64_MIN <= value <= INT64_MAX:
            return None, None
        # str() of an int over 4300 digits raises ValueError
        shown = str(value) if value.bit_length() < 256 else f"<{value.bit_length()}-bit integer>"
        return "integer outside the 64-bit range", shown
    if isinstance(value, float):
        if math.isfinite(value):
            return None, None
        return "not a finite number (NaN and infinities are refused)", str(value)
    return (
        f"{type(value).__name__} is not plain data "
        "(use a mapping, list, string, number, true/false or null)",
        repr(value)[:100],
    )


__all__ = [
    "INT64_MAX",
    "INT64_MIN",
    "NestingTooDeep",
    "check_data",
    "load_json_strict",
    "load_yaml_strict",
]
