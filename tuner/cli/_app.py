"""The `tuner` command's Typer app and what its commands share."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.cells import cell_len
from rich.console import Console
from rich.text import Text

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
    line: its type, the unit it counts, its settings and ASHA's rungs (hyperband: each
    bracket's trials and rungs)."""
    unit = settings.get("time_attr", "")
    skip = ("type", "time_attr", "rungs", "derived", "brackets")
    parts = [f"{k} {_number(v)}" for k, v in settings.items() if k not in skip]
    line = f"{settings.get('type')} counting {unit}: " + ", ".join(parts)
    if settings.get("brackets"):
        line += "".join(
            f"; bracket {i}: {b['trials']} trials, rungs at "
            + ", ".join(_number(r) for r in b["rungs"])
            for i, b in enumerate(settings["brackets"], 1)
        )
    elif settings.get("rungs"):
        line += "; rungs at " + ", ".join(_number(r) for r in settings["rungs"])
    if settings.get("derived"):
        line += f" (from the budget: {', '.join(settings['derived'])})"
    return line


def sampler_line(settings: dict[str, Any]) -> str:
    """Optuna's sampler in force (Plan.sampler) on one line: its type and random start."""
    line = f"{settings.get('type')}, the first {settings.get('n_startup_trials')} trials at random"
    if settings.get("derived"):
        line += f" (default: {', '.join(settings['derived'])})"
    return line


def _number(value: Any) -> str:
    return f"{value:,.0f}" if isinstance(value, int | float) and value == int(value) else str(value)


def out_console() -> Console:
    """The console of a command's output (stdout). soft_wrap: a line longer than the
    width is never broken by rich (a path or id must paste; piped, a line may be long);
    tables print through `print_table`, which lays them out for the width."""
    return Console(soft_wrap=True)


def compact_config(config: dict[str, Any]) -> str:
    """A config as `key=value` pairs on one line: strings bare unless they need quotes,
    other values as compact JSON (`[64,64]`), so a pair never holds a space."""

    def value(v: Any) -> str:
        if isinstance(v, str) and v and not any(ch.isspace() or ch in ',="' for ch in v):
            return v
        return json.dumps(v, separators=(",", ":"), default=str)

    return ", ".join(f"{k}={value(v)}" for k, v in config.items())


def print_table(
    out: Console,
    headers: list[str],
    rows: list[list[str]],
    *,
    configs: list[dict[str, Any]] | None = None,
    config_header: str = "config",
) -> None:
    """A table that never cuts or folds a value (ids, statuses, paths). `configs`, one
    per row, is a last column that may move below its row.

    Piped or redirected: plain tab-separated lines, a header first, every value whole
    (a config as JSON), whatever the width. On a terminal, the first layout that fits
    its width: rich's boxed table (configs as `k=v` pairs); else aligned columns with
    each row's config on its own line below it; else one block per row, a `header:
    value` line per cell. A value wider than the terminal stays on one line (the
    terminal wraps it on screen; copied, it is whole)."""
    if not out.is_terminal:
        lines = [headers, *rows]
        if configs is not None:
            lines = [[*headers, config_header]]
            lines += [[*r, json.dumps(c)] for r, c in zip(rows, configs, strict=True)]
        for row in lines:
            out.file.write("\t".join(row) + "\n")  # as is: rich would expand the tabs
        return
    shown = [compact_config(c) for c in configs] if configs is not None else None
    if _print_boxed(out, headers, rows, shown, config_header):
        return
    widths = [max(cell_len(c) for c in column) for column in zip(headers, *rows, strict=True)]
    right = [_numeric([r[i] for r in rows]) for i in range(len(headers))]
    if sum(widths) + 2 * (len(widths) - 1) <= out.width:
        _print_aligned(out, headers, rows, widths, right, shown, config_header)
    else:
        _print_blocks(out, headers, rows, shown, config_header)


def _numeric(cells: list[str]) -> bool:
    """Whether a column holds numbers only (right-aligned, as people read them)."""
    seen = False
    for cell in cells:
        if cell == "-":
            continue
        try:
            float(cell.replace(",", ""))
        except ValueError:
            return False
        seen = True
    return seen


def _print_boxed(
    out: Console,
    headers: list[str],
    rows: list[list[str]],
    configs: list[str] | None,
    config_header: str,
) -> bool:
    """rich's boxed table, printed only where every cell fits whole: whether it was."""
    from rich.measure import Measurement
    from rich.table import Table

    table = Table()
    for i, header in enumerate(headers):
        numeric = _numeric([r[i] for r in rows])
        table.add_column(header, no_wrap=True, justify="right" if numeric else "left")
    if configs is not None:
        table.add_column(config_header, no_wrap=True)
    for i, row in enumerate(rows):
        table.add_row(*row, *([configs[i]] if configs is not None else []))
    # measured without the width's cap: the width every cell needs whole
    if Measurement.get(out, out.options.update_width(1_000_000), table).maximum > out.width:
        return False
    out.print(table, soft_wrap=False)
    return True


def _print_aligned(
    out: Console,
    headers: list[str],
    rows: list[list[str]],
    widths: list[int],
    right: list[bool],
    configs: list[str] | None,
    config_header: str,
) -> None:
    """Columns padded to their widest cell, two spaces apart; a config below its row."""

    def line(cells: list[str]) -> str:
        padded = [
            c.rjust(w) if r else c.ljust(w) for c, w, r in zip(cells, widths, right, strict=True)
        ]
        return "  ".join(padded).rstrip()

    out.print(Text(line(headers), style="bold"), soft_wrap=True)
    if configs is not None:
        out.print(Text(f"  {config_header}", style="bold"), soft_wrap=True)
    for i, row in enumerate(rows):
        out.print(line(row), markup=False, highlight=False, soft_wrap=True)
        if configs is not None and configs[i]:
            out.print(Text(f"  {configs[i]}", style="dim"), soft_wrap=True)


def _print_blocks(
    out: Console,
    headers: list[str],
    rows: list[list[str]],
    configs: list[str] | None,
    config_header: str,
) -> None:
    """Too narrow for columns: each row as its first cell, then `header: value` lines."""
    for i, row in enumerate(rows):
        out.print(Text(row[0], style="bold"), soft_wrap=True)
        cells = list(zip(headers[1:], row[1:], strict=True))
        if configs is not None:
            cells.append((config_header, configs[i]))
        for header, cell in cells:
            out.print(Text(f"  {header}: {cell}"), soft_wrap=True)


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
            ]
        )
    print_table(
        out,
        ["trial id", *metrics, "confirmed (means)"],
        rows,
        configs=[member["config"] for member in pareto],
    )


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
