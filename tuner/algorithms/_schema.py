"""The schemas of the registry's three data files (algorithms.yaml, presets.yaml,
tuner/search_spaces/defaults.yaml): unknown keys are refused where the file's own keys
are fixed. The RLlib settings they hold (`config`, `performance_defaults`, ...) are
RLlib's own names, kept as given."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel, model_validator

from tuner.search_spaces import Domain

_STRICT = ConfigDict(extra="forbid", frozen=True, strict=True)


class AlgorithmEntry(BaseModel):
    """One RLlib algorithm of algorithms.yaml, keyed by its name."""

    model_config = _STRICT

    doc: str = Field(description="One line on what it is.")
    actions: list[Literal["discrete", "continuous"]] = Field(
        min_length=1, description="Action spaces RLlib's new API stack trains it on."
    )
    gpu_learner: bool = Field(False, description="Its learner can train on a GPU.")
    lstm: bool = Field(False, description="It trains recurrent RLModules.")
    performance_defaults: dict[str, Any] = Field(
        default_factory=dict, description="RLlib settings that make small trials fast."
    )
    flat_replay_defaults: dict[str, Any] = Field(
        default_factory=dict,
        description="Used instead of performance_defaults on the flat replay path.",
    )


class AlgorithmsFile(RootModel[dict[str, AlgorithmEntry]]):
    """algorithms.yaml: algorithm name -> entry."""

    model_config = ConfigDict(frozen=True)


class PresetEntry(BaseModel):
    """One preset of presets.yaml, keyed by its name; an entry named like an algorithm
    holds that algorithm's own fixed settings."""

    model_config = _STRICT

    algorithm: str = Field(description="The algorithm of algorithms.yaml it runs on.")
    doc: str | None = Field(None, description="One line on what it is.")
    config: dict[str, Any] = Field(
        default_factory=dict, description="RLlib settings it fixes (the spec's `config` wins)."
    )
    warnings: list[str] = Field(
        default_factory=list, description="Shown with the validation result."
    )


class PresetsFile(RootModel[dict[str, PresetEntry]]):
    """presets.yaml: preset name -> entry."""

    model_config = ConfigDict(frozen=True)


class EpsilonSchedules(BaseModel):
    """The schedules a `schedule` budget rule makes: epsilon from 1 to each final over
    each fraction of the budget."""

    model_config = _STRICT

    fractions: list[float] = Field(min_length=1)
    finals: list[float] = Field(min_length=1)


class BudgetRule(BaseModel):
    """How a default-space key is narrowed to a trial's budget (defaults.yaml `budget`;
    tuner/spec/_space.py applies it)."""

    model_config = _STRICT

    min_updates: int | None = Field(None, ge=1)
    at_most: str | None = None
    at_most_fraction: float | None = Field(None, gt=0)
    schedule: EpsilonSchedules | None = None

    def as_data(self) -> dict[str, Any]:
        """The rule as the registry hands it on: the keys it sets."""
        return self.model_dump(exclude_none=True)


class SpaceEntry(BaseModel):
    """One algorithm's default search space in defaults.yaml, keyed by the algorithm."""

    model_config = _STRICT

    source: str = Field(description="Where the space comes from.")
    space: dict[str, Domain] = Field(min_length=1)
    why: dict[str, str] = Field(default_factory=dict, description="Why each key is searched so.")
    budget: dict[str, BudgetRule] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _keys_are_searched(self) -> SpaceEntry:
        # a `why` or `budget` key (or an `at_most` bound) that names no key of the space
        # is a typo the rules would skip without a word
        searched = set(self.space) | {k for k, r in self.budget.items() if r.schedule}
        for section, keys in (
            ("why", list(self.why)),
            ("budget", list(self.budget)),
            ("at_most", [r.at_most for r in self.budget.values() if r.at_most]),
        ):
            unknown = [k for k in keys if k not in searched]
            if unknown:
                raise ValueError(f"{section} names keys the space does not search: {unknown}")
        return self

    def budget_rules(self) -> dict[str, dict[str, Any]]:
        """Every budget rule as data, in the file's order (the order they apply in)."""
        return {key: rule.as_data() for key, rule in self.budget.items()}

    def space_data(self) -> dict[str, dict[str, Any]]:
        """The space as written: key -> {kind: args}."""
        return {key: dom.model_dump() for key, dom in self.space.items()}


class SpacesFile(RootModel[dict[str, SpaceEntry]]):
    """tuner/search_spaces/defaults.yaml: algorithm name -> its default space."""

    model_config = ConfigDict(frozen=True)
