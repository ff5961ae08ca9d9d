"""The sweep's answer as the CLI prints it (`tuner run`, `submit --wait`, `status ID`):
the best config, its score and how sure, the model version and the checkpoint, and the
search's best beside it. It reads `best` (tuner.sweep.the_answer), as every surface does."""

from __future__ import annotations

import json
from typing import Any

from tuner.mlflow_names import STAGE_CONFIRM


def _num(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, int | float) else "-"


def answer_lines(best: dict[str, Any] | None, metric: str, extra: str = "") -> list[str]:
    """The answer in a few lines, from a BestTrial's JSON (`best` of `tuner run --output
    json` or of GET /experiments/{id}); `extra` follows the score (peak and last)."""
    if not best:
        return [f"no trial reported {metric}: no best config"]
    lines = []
    race = best.get("race") or {}
    confirmed = best.get("confirmed") or {}
    if best.get("source") == STAGE_CONFIRM and confirmed.get("mean") is not None:
        ci = confirmed.get("ci95") or [None, None]
        seeds = confirmed.get("seeds") or []
        lines.append(
            f"best config (confirmed on {len(seeds)} fresh seeds {seeds}): {metric} mean "
            f"{_num(confirmed['mean'])}, 95 % CI [{_num(ci[0])}, "
            f"{_num(ci[1])}], IQM {_num(confirmed.get('iqm'))}; "
            f"config of search trial {best['trial_id']}"
        )
    else:
        lines.append(
            ("best config, median seed: trial " if race else "best trial ")
            + f"{best['trial_id']}: "
            f"score {_num(best['metric_value'])}{' (mean over its seeds)' if race else ''} "
            f"({best.get('scope')} of {metric}){extra} (seed {best.get('seed')}); not "
            "confirmed on fresh seeds (the spec's `confirm` re-runs the top configs)"
        )
    if race.get("mean") is not None:
        scores = ", ".join(_num(x) for x in race.get("scores") or [])
        lines.append(
            f"raced in the search: mean {_num(race['mean'])} over seeds {race.get('seeds')} "
            f"(scores {scores})"
        )
    lines.append("config: " + json.dumps(best.get("config") or {}))
    if best.get("model_version"):
        lines.append(
            f"model: {best['model_version']} (checkpoint of trial "
            f"{best.get('checkpoint_trial_id') or best['trial_id']}, seed {best.get('seed')})"
        )
    if best.get("checkpoint"):
        lines.append(f"checkpoint: {best['checkpoint']}")
    search = best.get("search_best")
    if search:
        same = search.get("config") == best.get("config")
        lines.append(
            f"search best: trial {search['trial_id']}, score "
            f"{_num(search['metric_value'])} ({search.get('scope')} of {metric})"
            + (", the same config" if same else ", config " + json.dumps(search.get("config")))
        )
    return lines
