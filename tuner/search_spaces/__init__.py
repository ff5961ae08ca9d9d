"""Search-space domains and the default search space of each algorithm."""

from tuner.search_spaces._defaults import default_space
from tuner.search_spaces._domains import DOMAIN_KINDS, Domain

__all__ = ["DOMAIN_KINDS", "Domain", "default_space"]
