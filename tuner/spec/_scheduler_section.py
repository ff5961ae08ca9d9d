"""The spec's `scheduler` section: its type, unit and settings, and where ASHA's and
Hyperband's rungs fall (tuner/spec/_schedule.py sets what a spec leaves out)."""

from __future__ import annotations

import math
from typing import Literal

from pydantic import Field, model_validator

from tuner.spec._base import SpecModel as _Model


class SchedulerSpec(_Model):
    """Trial scheduler (early stopping / population based training)."""

    type: Literal["fifo", "asha", "hyperband", "median", "pbt", "pb2"] = Field(
        "fifo",
        description="fifo runs every trial to its stop criteria; asha and median "
        "stop poor trials early; hyperband is asynchronous Hyperband: ASHA's rungs over "
        "brackets that judge their trials first at later rungs, the last never where "
        "there are as many brackets as halving levels (the default with a budget); pbt "
        "perturbs hyperparameters from the search space; pb2 "
        "(Population Based Bandits) picks the new values with a Gaussian-process bandit "
        "within the [low, high] bounds of the space's uniform, loguniform, randint and "
        "quniform domains (a choice or grid key is an error). Neither combines with "
        "search.method optuna.",
    )
    time_attr: (
        Literal["training_iteration", "num_env_steps_sampled_lifetime", "time_total_s"] | None
    ) = Field(
        None,
        description="Result key that measures a trial's progress. Default: the unit of "
        "the trials' budget, so rungs and grace periods count what the budget counts: "
        "num_env_steps_sampled_lifetime with stop.timesteps_total, else "
        "training_iteration with stop.training_iteration, else time_total_s with "
        "stop.time_total_s; training_iteration without a budget and for pbt/pb2 (their "
        "perturbation_interval is in iterations).",
    )
    grace_period: int | None = Field(
        None,
        ge=1,
        description="asha, hyperband, median: progress before a trial may be stopped. "
        "Default: from the budget (the stop criterion in time_attr) and the number of trials "
        "(tuner/spec/scheduler_defaults.yaml), else 1.",
    )
    max_t: int | None = Field(
        None,
        ge=1,
        description="asha, hyperband: the most progress any trial gets. Default: the budget, "
        "else 100.",
    )
    reduction_factor: float | None = Field(
        None, gt=1, description="asha, hyperband: halving rate. Default 3."
    )
    brackets: int | None = Field(
        None,
        ge=1,
        description="hyperband: how many brackets: bracket b judges its trials first at "
        "grace_period x reduction_factor^b (at most max_t), so the last of as many "
        "brackets as halving levels (grace_period to max_t) runs every trial to max_t. "
        "Default: as many as the levels, at most 3.",
    )
    min_samples_required: int | None = Field(
        None,
        ge=1,
        description="median: trials with results before any is judged. Default: 5, at most "
        "half the trials (at least 2); 2 without a budget.",
    )
    perturbation_interval: int = Field(
        2, ge=1, description="pbt/pb2: progress (time_attr) between perturbations."
    )

    @property
    def halving(self) -> bool:
        """asha or hyperband: successive halving at rungs.

        Returns:
            Whether grace_period, max_t and reduction_factor place rungs.
        """
        return self.type in ("asha", "hyperband")

    @model_validator(mode="after")
    def _grace_below_max(self) -> SchedulerSpec:
        if self.brackets is not None and self.type != "hyperband":
            raise ValueError(
                f"brackets ({self.brackets}) is a hyperband setting; scheduler.type is "
                f"{self.type!r}"
            )
        if not self.halving or self.grace_period is None or self.max_t is None:
            return self
        if self.grace_period > self.max_t:
            raise ValueError(f"grace_period ({self.grace_period}) must be <= max_t ({self.max_t})")
        return self

    def asha_rungs(self) -> int:
        """How many rungs ASHA makes of max_t, grace_period and reduction_factor.

        As Tune counts them (hyperband: its first bracket's). A service limits it
        (TUNER_MAX_ASHA_RUNGS).

        Returns:
            The number of rungs; 0 for another scheduler.
        """
        return len(self.asha_milestones())

    def asha_milestones(self, bracket: int = 0) -> list[float]:
        """Where ASHA judges trials, in time_attr, as Tune's ASHA places its rungs.

        grace_period x reduction_factor^(bracket + k) below max_t, then max_t's own;
        bracket 0 is plain ASHA's.

        Args:
            bracket: hyperband's bracket.

        Returns:
            The milestones; [] for another scheduler.
        """
        if not self.halving:
            return []
        max_t, factor = self.max_t or 100, self.reduction_factor or 3
        grace = min((self.grace_period or 1) * factor**bracket, max_t)
        count = 1 + math.floor(math.log(max_t / grace) / math.log(factor))
        return [grace * factor**k for k in range(count)]

    def halving_levels(self) -> int:
        """How many budgets successive halving spans, grace_period to max_t.

        Each grace_period x reduction_factor^k below max_t, then max_t (a grace rounded
        up lands its top level a step past max_t: that level is max_t's).

        Returns:
            The levels (hyperband: the most brackets); 0 for another scheduler.
        """
        if not self.halving:
            return 0
        max_t, factor = self.max_t or 100, self.reduction_factor or 3
        level, below = self.grace_period or 1, 0
        while level < max_t:
            level, below = level * factor, below + 1
        return 1 + below

    def bracket_graces(self) -> list[float]:
        """hyperband: each bracket's grace period, the first rung it judges trials at.

        grace_period x reduction_factor^b, at most max_t (a bracket that judges only at
        max_t stops no trial early).

        Returns:
            One per bracket ([grace_period] for asha); [] for another scheduler.
        """
        if not self.halving:
            return []
        factor, max_t = self.reduction_factor or 3, self.max_t or 100
        grace = self.grace_period or 1
        return [min(grace * factor**b, max_t) for b in range(self.brackets or 1)]
