"""Search-space domains, the algorithms' default spaces, and the base settings per env.

The domains (uniform, loguniform, choice, grid, ...), the default spaces of the
algorithms, kept as data (defaults.yaml, read by tuner.algorithms), and the base
settings per env (env_settings.yaml).
"""

from tuner.search_spaces._domains import DOMAIN_KINDS, PB2_KINDS, Domain
from tuner.search_spaces._env_settings import (
    BaseSettings,
    base_settings,
    env_key,
    env_settings_table,
)
from tuner.search_spaces._keys import UPDATES_PER_ENV_STEP, is_fixed

__all__ = [
    "DOMAIN_KINDS",
    "PB2_KINDS",
    "UPDATES_PER_ENV_STEP",
    "BaseSettings",
    "Domain",
    "base_settings",
    "env_key",
    "env_settings_table",
    "is_fixed",
]
