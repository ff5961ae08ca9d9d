"""CPU time of the live hyperparameter importance (tuner/importance.py) on 200 finished
trials: our small fANOVA forest against Optuna's default one, same trials, one process.

    .venv/bin/python bench/importance_cost.py

The driver recomputes the importance after every finished trial, so its cost is paid
per trial. Prints each one's CPU seconds (median of 3) and their ratio, and whether both
rank the key that drives the synthetic metric first.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import ratio_line, table  # noqa: E402

# the unit tests' synthetic trials: only lr drives the value (gamma, num_epochs do nothing)
from tests.unit.test_importance import SPACE as space  # noqa: E402
from tests.unit.test_importance import synthetic as trials  # noqa: E402


def cpu_seconds(fn) -> tuple[float, object]:
    runs = []
    for _ in range(3):
        start = time.process_time()
        out = fn()
        runs.append(time.process_time() - start)
    return statistics.median(runs), out


def main() -> None:
    from tuner import importance as imp

    rows = trials(n=200)
    imp.importance(trials(n=8), space, "max")  # imports (Optuna, scikit-learn) done
    ours, ranked = cpu_seconds(lambda: imp.importance(rows, space, "max", evaluator="fanova"))

    def optuna_default() -> dict:
        # the same call with Optuna's default fANOVA forest (64 trees, depth 64)
        small = imp.FANOVA_TREES, imp.FANOVA_DEPTH
        imp.FANOVA_TREES, imp.FANOVA_DEPTH = 64, 64
        try:
            return imp.importance(rows, space, "max", evaluator="fanova")
        finally:
            imp.FANOVA_TREES, imp.FANOVA_DEPTH = small

    theirs, ranked_default = cpu_seconds(optuna_default)
    print(
        table(
            ["fANOVA forest", "CPU s, 200 trials (median of 3)", "first key"],
            [
                [
                    f"ours ({imp.FANOVA_TREES} trees, depth {imp.FANOVA_DEPTH})",
                    f"{ours:.3f}",
                    next(iter(ranked)),
                ],
                [
                    "Optuna's default (64 trees, depth 64)",
                    f"{theirs:.3f}",
                    next(iter(ranked_default)),
                ],
            ],
        )
    )
    print(ratio_line("importance_cost.ours_vs_optuna_default_cpu", ours / theirs, "<= 0.2"))


if __name__ == "__main__":
    main()
