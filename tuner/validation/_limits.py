"""What a spec asks beyond a service's limits (trials per sweep, ASHA rungs), and
hyperband's brackets beyond its halving levels."""

from __future__ import annotations

from tuner.search_spaces import Domain
from tuner.spec import ExperimentSpec, SpecIssue, resolved_scheduler, search_trials


def limit_issues(
    spec: ExperimentSpec,
    space: dict[str, Domain],
    max_trials: int | None,
    max_asha_rungs: int | None,
) -> list[SpecIssue]:
    """The service's limits the spec exceeds, each naming its setting."""
    issues = []
    trials = search_trials(spec, space)
    if max_trials is not None and trials > max_trials:
        issues.append(
            SpecIssue(
                loc="search",
                value=trials,
                msg=f"makes {trials} trials (grid size x num_samples); this service runs at "
                f"most {max_trials} per sweep (TUNER_MAX_TRIALS)",
            )
        )
    rungs = resolved_scheduler(spec, space).asha_rungs()
    if max_asha_rungs is not None and rungs > max_asha_rungs:
        issues.append(
            SpecIssue(
                loc="scheduler",
                value=rungs,
                msg=f"max_t / grace_period / reduction_factor make {rungs} ASHA rungs; this "
                f"service allows at most {max_asha_rungs} (TUNER_MAX_ASHA_RUNGS): raise "
                "grace_period or reduction_factor",
            )
        )
    return issues


def bracket_issues(spec: ExperimentSpec, space: dict[str, Domain]) -> list[SpecIssue]:
    """hyperband: more brackets than halving levels (two would never judge a trial)."""
    sched = resolved_scheduler(spec, space)
    levels = sched.halving_levels()
    if sched.type != "hyperband" or len(sched.bracket_graces()) <= levels:
        return []
    return [
        SpecIssue(
            loc="scheduler.brackets",
            value=sched.brackets,
            msg=f"grace_period to max_t at reduction_factor spans {levels} halving levels "
            f"and bracket b judges first at level b: at most {levels} brackets",
        )
    ]
