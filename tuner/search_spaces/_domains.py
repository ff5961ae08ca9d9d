"""Domains of a search space, written in a spec as a one-key mapping.

    lr: {loguniform: [1.0e-5, 1.0e-3]}
    gamma: {choice: [0.98, 0.99]}
    num_epochs: {grid: [4, 8]}
    minibatch_size: {randint: [32, 256]}      # both bounds inclusive
    clip_param: {quniform: [0.1, 0.4, 0.05]}  # low, high, step

`to_tune()` turns one into a Ray Tune domain; Ray is imported only there.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_serializer, model_validator

DOMAIN_KINDS: tuple[str, ...] = ("grid", "choice", "uniform", "loguniform", "randint", "quniform")


class Domain(BaseModel):
    """One hyperparameter's domain: exactly one of the fields below."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    grid: list[Any] | None = Field(
        None, min_length=1, description="Every value, in turn (search.method grid only)."
    )
    choice: list[Any] | None = Field(None, min_length=1, description="One of these values.")
    uniform: tuple[float, float] | None = Field(None, description="[low, high), uniform.")
    loguniform: tuple[float, float] | None = Field(
        None, description="[low, high), uniform in log space; low > 0."
    )
    randint: tuple[int, int] | None = Field(
        None, description="[low, high], an integer; both bounds inclusive."
    )
    quniform: tuple[float, float, float] | None = Field(
        None, description="[low, high, q]: uniform rounded to multiples of q."
    )

    @model_validator(mode="before")
    @classmethod
    def _one_key(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            raise ValueError(
                f"a domain is a one-key mapping such as {{choice: [...]}}, got {data!r}; "
                "fixed values go under `config`"
            )
        if len(data) != 1:
            raise ValueError(
                f"a domain has exactly one of {', '.join(DOMAIN_KINDS)}; got keys {sorted(data)}"
            )
        return data

    @model_validator(mode="after")
    def _bounds(self) -> Domain:
        kind = self.kind
        if kind in ("uniform", "loguniform", "randint", "quniform"):
            low, high = getattr(self, kind)[:2]
            if max(abs(low), abs(high)) > 1e15:
                raise ValueError(f"{kind} bounds must lie within +-1e15, got [{low}, {high}]")
            if not (math.isfinite(low) and math.isfinite(high)):
                raise ValueError(f"{kind} bounds must be finite, got [{low}, {high}]")
            if kind == "randint":
                if low > high:
                    raise ValueError(f"randint needs low <= high, got [{low}, {high}]")
            elif low >= high:
                raise ValueError(f"{kind} needs low < high, got [{low}, {high}]")
            if kind == "loguniform" and low <= 0:
                raise ValueError(f"loguniform needs low > 0, got {low}")
            if kind == "quniform" and self.quniform[2] <= 0:
                raise ValueError(f"quniform needs q > 0, got {self.quniform[2]}")
        return self

    @model_serializer
    def _as_written(self) -> dict[str, Any]:
        return {self.kind: list(self.args)}

    @property
    def kind(self) -> str:
        """Which domain this is (grid, choice, uniform, ...)."""
        for name in DOMAIN_KINDS:
            if getattr(self, name) is not None:
                return name
        raise AssertionError("validated domain without a kind")

    @property
    def args(self) -> Any:
        """The domain's values or bounds as written."""
        return getattr(self, self.kind)

    def contains(self, value: Any) -> bool:
        """Whether a sampled value lies in this domain (bounds as documented).

        Args:
            value: The sampled value.

        Returns:
            True where it lies in the domain.
        """
        kind, args = self.kind, self.args
        if kind in ("grid", "choice"):
            return value in args
        if kind == "randint":
            return isinstance(value, int) and args[0] <= value <= args[1]
        if kind == "quniform":
            return args[0] - 1e-9 <= value <= args[1] + 1e-9
        return args[0] <= value <= args[1]

    def to_tune(self) -> Any:
        """The equivalent Ray Tune domain.

        Returns:
            The Tune domain (or grid search).
        """
        from ray import tune

        kind, args = self.kind, self.args
        if kind == "grid":
            return tune.grid_search(list(args))
        if kind == "choice":
            return tune.choice(list(args))
        if kind == "uniform":
            return tune.uniform(*args)
        if kind == "loguniform":
            return tune.loguniform(*args)
        if kind == "randint":
            return tune.randint(args[0], args[1] + 1)  # Tune's upper bound is exclusive
        return tune.quniform(*args)

    def __str__(self) -> str:
        return f"{self.kind}{list(self.args)}"


# Domains PB2 can bound: it models each key as a number in [low, high].
PB2_KINDS: tuple[str, ...] = ("uniform", "loguniform", "randint", "quniform")
