"""Trial schedulers from the spec (metric and mode are set in TuneConfig only)."""

from __future__ import annotations

import re
from typing import Any

from ray.tune.schedulers import (
    ASHAScheduler,
    FIFOScheduler,
    MedianStoppingRule,
    PopulationBasedTraining,
    TrialScheduler,
)

from tuner.mlflow_names import ITERATION_KEY
from tuner.rllib import config_path
from tuner.search_spaces import PB2_KINDS, Domain
from tuner.spec import SchedulerSpec, bracket_shares, next_bracket
from tuner.sweep._judged_on import JudgedOn


def perturbed_keys(space: dict[str, Domain]) -> list[str]:
    """The search-space keys pbt and pb2 perturb: RLlib settings. `model.<key>` and
    `env_config.<key>` are sampled once per trial and kept: a restored checkpoint's
    network (and env) must match the config it is restored into."""
    return [key for key in space if "." not in key]


def pbt_mutation(dom: Domain) -> Any:
    """What PBT perturbs a key with: a choice's values as a list (PBT moves to a
    neighbouring value or resamples; as a Tune domain it would multiply the value by 0.8
    or 1.2 and leave the choices: gamma 0.99 -> 1.188), else the Tune domain (multiplied
    by 0.8 or 1.2, rounded for an integer, or resampled)."""
    return list(dom.args) if dom.kind == "choice" else dom.to_tune()


def pb2_bounds(space: dict[str, Domain]) -> dict[str, list[float]]:
    """PB2's `hyperparam_bounds` by search-space key: [low, high] of each continuous
    domain (a quniform's step and a loguniform's log scale are not PB2's: it picks
    values anywhere in [low, high], cast back to int for a randint). Raises ValueError
    for a key PB2 cannot bound (choice, grid); the spec checks name it first."""
    out = {}
    for key in perturbed_keys(space):
        dom = space[key]
        if dom.kind not in PB2_KINDS:
            raise ValueError(f"pb2 cannot bound search.space.{key} ({dom})")
        low, high = dom.args[:2]
        out[key] = [low, high]
    return out


class TunerASHA(JudgedOn, ASHAScheduler):
    """Tune's ASHA, judging on the scheduler's metric."""


class TunerMedian(JudgedOn, MedianStoppingRule):
    """Tune's median stopping rule, judging on the scheduler's metric."""


class TunerPBT(JudgedOn, PopulationBasedTraining):
    """Tune's PBT, exploiting on the scheduler's metric."""


# Tune's search algorithms tag each trial with its count in the sweep ("3" or
# "3_lr=0.001"), counted from 0 by a BasicVariantGenerator and from 1 by a Searcher's
# SearchGenerator; the tag is kept on a retry and on a resume
_TAG_COUNT = re.compile(r"^(\d+)(?:_|$)")


def trial_count(trial: Any) -> int | None:
    """The trial's count in its sweep, read from Tune's experiment tag; None where the
    tag carries none."""
    match = _TAG_COUNT.match(str(getattr(trial, "experiment_tag", "") or ""))
    return int(match.group(1)) if match else None


class HyperbandBrackets(JudgedOn, FIFOScheduler):
    """Asynchronous Hyperband: one ASHA per bracket. The sweep's n-th trial joins the
    bracket the n-th turn of the deal gives (tuner.spec.next_bracket), so the same
    sweep puts the same trials in the same brackets, a retried or resumed trial keeps
    its own (Tune's own brackets draw each trial's at random, again on every add)."""

    def __init__(self, spec: SchedulerSpec, time_attr: str, first_count: int = 1) -> None:
        super().__init__()
        self.first_count = first_count  # the tag count of the sweep's first trial
        factor = spec.reduction_factor or 3
        self.brackets = [
            TunerASHA(
                time_attr=time_attr,
                grace_period=grace,
                max_t=spec.max_t or 100,
                reduction_factor=factor,
            )
            for grace in spec.bracket_graces()
        ]
        self.shares = bracket_shares(len(self.brackets), factor)
        self.dealt: list[int] = []  # the bracket of the sweep's n-th trial
        self.counts = [0] * len(self.brackets)
        self.bracket_of: dict[str, int] = {}

    def set_search_properties(self, metric: str | None, mode: str | None, **spec: Any) -> bool:
        """Sets the metric (`judged_on` where set) and mode here and on every bracket."""
        super().set_search_properties(metric, mode, **spec)
        metric = self.judged_on or metric
        return all(b.set_search_properties(metric, mode, **spec) for b in self.brackets)

    def on_trial_add(self, tune_controller: Any, trial: Any) -> None:
        """Deals the trial to its bracket (a trial added again keeps its own)."""
        index = self.bracket_of.get(trial.trial_id)
        if index is None:
            count = trial_count(trial)
            known = count is not None and count >= self.first_count
            index = self._deal(count - self.first_count if known else len(self.dealt))
            self.bracket_of[trial.trial_id] = index
        self.brackets[index].on_trial_add(tune_controller, trial)

    def on_trial_result(self, tune_controller: Any, trial: Any, result: dict) -> str:
        """The trial's bracket decides."""
        return self._bracket(trial).on_trial_result(tune_controller, trial, result)

    def on_trial_complete(self, tune_controller: Any, trial: Any, result: dict) -> None:
        """The trial's bracket records its last result."""
        self._bracket(trial).on_trial_complete(tune_controller, trial, result)

    def on_trial_remove(self, tune_controller: Any, trial: Any) -> None:
        """The trial leaves its bracket."""
        self._bracket(trial).on_trial_remove(tune_controller, trial)

    def debug_string(self) -> str:
        """Each bracket's ASHA."""
        lines = (f"bracket {i + 1}: {b.debug_string()}" for i, b in enumerate(self.brackets))
        return "\n".join(lines)

    def _deal(self, place: int) -> int:
        while len(self.dealt) <= place:
            turn = next_bracket(self.counts, self.shares)
            self.counts[turn] += 1
            self.dealt.append(turn)
        return self.dealt[place]

    def _bracket(self, trial: Any) -> ASHAScheduler:
        return self.brackets[self.bracket_of[trial.trial_id]]


def build_scheduler(
    spec: SchedulerSpec,
    space: dict[str, Domain],
    config: dict[str, Any] | None = None,
    first_count: int = 1,
    judged_on: str | None = None,
) -> TrialScheduler:
    """The Tune scheduler a spec asks for. `config` is the trial config (the param
    space): pbt and pb2 perturb each key where RLlib keeps it there
    (`train_batch_size_per_learner` -> `_train_batch_size_per_learner`), the place the
    sampled value was laid and the one reported. `spec` is the resolved scheduler
    (tuner.spec.resolved_scheduler): a time_attr left out counts iterations here.
    `first_count`: the tag count of the sweep's first trial (hyperband's deal; 0 under a
    BasicVariantGenerator, 1 under a Searcher). `judged_on`: the metric it judges trials
    on where not TuneConfig's (tuner.spec.scheduler_metric)."""
    scheduler = _scheduler(spec, space, config or {}, first_count)
    if isinstance(scheduler, JudgedOn):
        scheduler.judged_on = judged_on
    return scheduler


def _scheduler(
    spec: SchedulerSpec, space: dict[str, Domain], config: dict[str, Any], first_count: int
) -> TrialScheduler:
    time_attr = spec.time_attr or ITERATION_KEY  # resolved_scheduler sets the budget's unit
    if spec.type == "hyperband":
        return HyperbandBrackets(spec, time_attr, first_count)
    if spec.type == "asha":
        return TunerASHA(
            time_attr=time_attr,
            grace_period=spec.grace_period or 1,
            max_t=spec.max_t or 100,
            reduction_factor=spec.reduction_factor or 3,
        )
    if spec.type == "median":
        return TunerMedian(
            time_attr=time_attr,
            grace_period=spec.grace_period or 1,
            min_samples_required=spec.min_samples_required or 2,
        )
    if spec.type == "pbt":
        mutations: dict[str, Any] = {
            config_path(key, config)[0]: pbt_mutation(space[key]) for key in perturbed_keys(space)
        }
        return TunerPBT(
            time_attr=time_attr,
            perturbation_interval=spec.perturbation_interval,
            hyperparam_mutations=mutations,
        )
    if spec.type == "pb2":
        from tuner.sweep._pb2 import TunerPB2  # scikit-learn: imported only for pb2

        bounds = {config_path(key, config)[0]: b for key, b in pb2_bounds(space).items()}
        return TunerPB2(
            time_attr=time_attr,
            perturbation_interval=spec.perturbation_interval,
            hyperparam_bounds=bounds,
        )
    return FIFOScheduler()
