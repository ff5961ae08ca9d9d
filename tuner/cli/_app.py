"""The `tuner` command's Typer app and what its commands share."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from tuner.settings import Settings
from tuner.spec import SpecError
from tuner.statuses import SweepStatus

app = typer.Typer(
    help="Hyperparameter tuning for RL: Ray Tune sweeps over RLlib, tracked in MLflow.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


# soft_wrap: a path or id in a message is never broken across lines (it must paste)
err = Console(stderr=True, soft_wrap=True)


def _print_issues(error: SpecError, path: Path) -> None:
    err.print(f"[red]{path}: {len(error.issues)} problem(s)[/red]")
    for issue in error.issues:
        err.print(f"  {issue}", markup=False, highlight=False)


AllowModule = Annotated[
    list[str] | None,
    typer.Option(
        "--allow-module",
        help="Allow code from this module (and its submodules) by import path "
        "'module:Name' in the spec (repeatable; adds to TUNER_ALLOWED_MODULES).",
    ),
]


def _allowed(settings: Settings, extra: list[str] | None) -> list[str]:
    return [*settings.allowed_module_list, *(m.strip() for m in extra or [] if m.strip())]


def scheduler_line(settings: dict[str, Any]) -> str:
    """A scheduler's settings in force (Plan.scheduler, ExperimentView.scheduler) on one
    line: its type, the unit it counts, its settings and ASHA's rungs."""
    unit = settings.get("time_attr", "")
    shown = {
        k: v for k, v in settings.items() if k not in ("type", "time_attr", "rungs", "derived")
    }
    parts = [f"{k} {_number(v)}" for k, v in shown.items()]
    line = f"{settings.get('type')} counting {unit}: " + ", ".join(parts)
    if settings.get("rungs"):
        line += "; rungs at " + ", ".join(_number(r) for r in settings["rungs"])
    if settings.get("derived"):
        line += f" (from the budget: {', '.join(settings['derived'])})"
    return line


def _number(value: Any) -> str:
    return f"{value:,.0f}" if isinstance(value, int | float) and value == int(value) else str(value)


def print_table(out: Console, headers: list[str], rows: list[list[str]]) -> None:
    """A table that never cuts a value (ids, paths): on a terminal, rich's table with
    every cell folded onto more lines where the width runs out, never an ellipsis; piped
    or redirected, plain tab-separated lines, a header first."""
    if not out.is_terminal:
        for row in [headers, *rows]:
            out.file.write("\t".join(row) + "\n")  # as is: rich would expand the tabs
        return
    from rich.table import Table

    table = Table()
    for header in headers:
        table.add_column(header, overflow="fold")
    for row in rows:
        table.add_row(*row)
    out.print(table)


def print_pareto(out: Console, pareto: list[dict], scope: str) -> None:
    """The Pareto front of a sweep with several objectives (`tuner run`, `tuner
    status`): each member's value of every objective under scope, its confirmed means
    where it was re-run, and its config."""
    if not pareto:
        return
    metrics = list(pareto[0]["values"])
    out.print(
        f"Pareto front ({len(pareto)} trials, {scope} of each objective; best {metrics[0]} first):",
        highlight=False,
        soft_wrap=True,
    )
    rows = []
    for member in pareto:
        confirmed = (member.get("confirmed") or {}).get("values") or {}
        rows.append(
            [
                member["trial_id"],
                *(f"{member['values'][m]:.4g}" for m in metrics),
                ", ".join(f"{v:.4g}" if v is not None else "-" for v in confirmed.values()) or "-",
                json.dumps(member["config"]),
            ]
        )
    print_table(out, ["trial id", *metrics, "confirmed (means)", "config"], rows)


# `tuner run` / `tuner submit --wait`: how the sweep ended, as an exit code (README); 2 is
# a bad spec or option, 3 an unreachable server, 130 an interrupt
EXIT_PARTIAL = 4


def outcome_code(status: str) -> int:
    """The exit code of a sweep's outcome: 0 SUCCEEDED, 4 PARTIAL (some trial failed for
    good after its retries), 1 FAILED or STOPPED."""
    if status == SweepStatus.SUCCEEDED:
        return 0
    return EXIT_PARTIAL if status == SweepStatus.PARTIAL else 1


class _Ending:
    """How this process is ending, for _end_without_teardown."""

    code: int | None = None  # the exit code, once `main` has seen it
    after_ray: bool = False  # `tuner run` began its Ray: end without the teardown
