"""Comparing a lean Learner's reported learner metrics with RLlib's, value by value."""

from __future__ import annotations

from typing import Any

import torch


def assert_reported_alike(theirs: dict[Any, Any], ours: dict[Any, Any]) -> None:
    """Every stat RLlib's Learner reported, the lean one reported exactly (a float32
    tensor's value as a number; NaN where RLlib's is: a stat no update logged)."""
    assert ours.keys() == theirs.keys()
    for key, value in theirs.items():
        torch.testing.assert_close(
            torch.as_tensor(ours[key]).double(),
            torch.as_tensor(value).double(),
            rtol=0,
            atol=0,
            equal_nan=True,
            msg=str(key),
        )
