"""Search-space domains (uniform, loguniform, choice, grid, ...) and the default spaces
of the algorithms, kept as data (defaults.yaml, read by tuner.algorithms)."""

from tuner.search_spaces._domains import DOMAIN_KINDS, PB2_KINDS, Domain

__all__ = ["DOMAIN_KINDS", "PB2_KINDS", "Domain"]
