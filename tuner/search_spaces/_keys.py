"""Search-space keys of tuner's own, beside RLlib's settings."""

from __future__ import annotations

from collections.abc import Container

# A key a search space may search for an algorithm with RLlib's `training_intensity`
# (DQN, SAC): gradient updates per env step sampled (SB3's gradient_steps / train_freq),
# apart from the train batch. A trial trains it x its train batch (of all learners)
# samples per env step, through RLlib's training_intensity (tuner/rllib/_update_ratio.py:
# with N remote env runners N / (N + 1) of that, which RLlib trains (N + 1) / N times), so a
# space can pair any batch with any ratio; RLlib's own key ties the two.
UPDATES_PER_ENV_STEP = "updates_per_env_step"


# The RLlib setting each of tuner's own keys sets: fixing that setting fixes the key.
SETS = {UPDATES_PER_ENV_STEP: "training_intensity"}


def is_fixed(key: str, fixed: Container[str]) -> bool:
    """Whether fixed settings (their top-level names) leave a space key nothing to search.

    Its own name fixed, or, for one of tuner's own keys, the RLlib setting it sets.

    Args:
        key: The space key (top-level; a dotted one's first part).
        fixed: The names of the fixed settings.

    Returns:
        True where it is fixed.
    """
    return key in fixed or (key in SETS and SETS[key] in fixed)
