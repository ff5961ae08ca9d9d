"""What makes a sweep's Pareto front mislead (`objectives`): warnings, never errors."""

from __future__ import annotations

import re

from tuner.spec import ExperimentSpec

# results that only grow: under any scope but `last` a trial's value is not its total
_RUNNING_TOTAL = re.compile(r"(^|/)(time_total_s|timesteps_total|training_iteration)$|_lifetime$")


def objective_warnings(spec: ExperimentSpec) -> list[str]:
    """What makes a Pareto front mislead: a running total ranked under a scope other
    than `last`, and a scheduler that stops trials early (a trial stopped early looks
    cheap on every cost objective)."""
    if not spec.objectives:
        return []
    out = []
    if spec.scope != "last":
        totals = [o.metric for o in spec.objectives if _RUNNING_TOTAL.search(o.metric)]
        if totals:
            out.append(
                f"objectives {', '.join(totals)} only grow: under scope {spec.scope!r} a "
                "trial's value is not its total (use scope: last)"
            )
    if spec.scheduler.type in ("asha", "median"):
        out.append(
            f"scheduler {spec.scheduler.type} stops trials early by the first objective: a "
            "trial stopped early looks cheap on the others and can join the Pareto front "
            "(use scheduler fifo)"
        )
    return out
