"""RLlib settings whose value is a number, checked against RLlib's own defaults.

A string where RLlib's default is a number passes a schema of `config` (any JSON) and
then fails in every trial (`clamp() received (Tensor, int, str)` in a loss), so it is
refused before anything launches, naming the setting, the value and the type. RLlib's
defaults come in as data (`AlgorithmConfig.to_dict()`): this layer does not import RLlib.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tuner.search_spaces import Domain
from tuner.spec._errors import SpecIssue

# RLlib's default of a deprecated setting (ray's DEPRECATED_VALUE): it says no type.
_DEPRECATED = -1
# Number settings for which RLlib also takes a word.
_WORDS: dict[str, tuple[str, ...]] = {
    "rollout_fragment_length": ("auto",),
    "evaluation_duration": ("auto",),
}


def number_default(defaults: Mapping[str, Any], key: str) -> int | float | None:
    """RLlib's default of `key` where it is a number.

    Not a bool, not a deprecated setting's marker.

    Args:
        defaults: RLlib's default config as a dict.
        key: The setting's name.

    Returns:
        The default; None otherwise.
    """
    default = defaults.get(key)
    if isinstance(default, bool) or not isinstance(default, int | float):
        return None
    if type(default) is int and default == _DEPRECATED:
        return None
    return default


def _is_number_text(text: str) -> bool:
    try:
        float(text.replace("_", ""))
    except ValueError:
        return False
    return True


def _not_a_number(
    loc: str, key: str, value: Any, defaults: Mapping[str, Any], algorithm: str
) -> SpecIssue | None:
    default = number_default(defaults, key)
    if default is None or not isinstance(value, str) or value in _WORDS.get(key, ()):
        return None
    kind = "an int" if isinstance(default, int) else "a float"
    hint = "; write the number without quotes" if _is_number_text(value) else ""
    return SpecIssue(
        loc=loc,
        value=value,
        msg=f"RLlib's {algorithm} setting `{key}` is a number ({kind}: its default is "
        f"{default!r}), not the string {value!r}{hint}",
    )


def number_setting_issues(
    config: Mapping[str, Any],
    space: Mapping[str, Domain] | None,
    defaults: Mapping[str, Any],
    algorithm: str,
) -> list[SpecIssue]:
    """Every string where RLlib's default is a number.

    A value fixed under `config` (loc `config.<key>`) and each `choice` / `grid` value of
    the search space (loc `search.space.<key>`).

    Args:
        config: The spec's `config`.
        space: The spec's search space, if any.
        defaults: RLlib's default config of `algorithm` as a dict.
        algorithm: The spec's algorithm (named in the messages).

    Returns:
        The issues.
    """
    issues = [
        _not_a_number(f"config.{key}", key, value, defaults, algorithm)
        for key, value in config.items()
    ]
    for key, dom in (space or {}).items():
        if dom.kind in ("choice", "grid"):
            issues += [
                _not_a_number(f"search.space.{key}", key, value, defaults, algorithm)
                for value in dom.args
            ]
    return [issue for issue in issues if issue is not None]


def _as_int(value: Any, default: int | float | None) -> Any:
    if isinstance(default, int) and isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def integral_floats_as_ints(
    config: dict[str, Any], space: Mapping[str, Domain] | None, defaults: Mapping[str, Any]
) -> None:
    """Turns, in place, a float of integral value into an int where RLlib's default is an int.

    (`train_batch_size_per_learner: 4e3` -> 4000): a number written with an exponent is a
    float, and RLlib uses such settings as counts and sizes. In `config` and in the
    `choice` / `grid` values of the search space.

    Args:
        config: The spec's `config` (changed in place).
        space: The spec's search space, if any (changed in place).
        defaults: RLlib's default config as a dict.
    """
    for key, value in config.items():
        config[key] = _as_int(value, number_default(defaults, key))
    for key, dom in (space or {}).items():
        if dom.kind in ("choice", "grid"):
            values = dom.args
            values[:] = [_as_int(v, number_default(defaults, key)) for v in values]


__all__ = ["integral_floats_as_ints", "number_default", "number_setting_issues"]
