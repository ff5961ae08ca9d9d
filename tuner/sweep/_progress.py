"""Progress of a sweep as it runs, where `tuner run` prints it (stdout, or stderr with
`--output json`).

On a terminal: a live rich table of trials, laid out for the terminal's width; a header
never loses a character (too narrow, a long one folds at its `_` and `/`, and as a last
resort any column folds, never ellipsised). Piped or redirected: no live table (a pipe
gets no redraws, and rich would lay it out for 80 columns and cut the names); a header
line, then one tab-separated line per trial as it finishes, every value whole (floats as
Python writes them back: `0.00031622776601683794`, lists and dicts as JSON).

The numbers are the page's, under the same names: `score` (what trials are ranked by:
the final deterministic evaluation of a trial that ran its budget, else the metric under
the spec's scope) and `last` (the training metric's last value)."""

from __future__ import annotations

import json
import math
import re
from typing import Any

from ray.tune import Callback
from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.live import Live
from rich.measure import Measurement
from rich.table import Table

from tuner.mlflow_names import ITERATION_KEY, PER_ID_METRICS, STEP_KEY
from tuner.results import lookup
from tuner.statuses import TrialStatus
from tuner.tracking import Ranking

PER_ID_GROUPS = [[group.split("/")[-1]] for group in PER_ID_METRICS]
FIXED_COLUMNS = ["trial", "status", "iter", "env steps"]
# one name per number, as the page, the JSON and MLflow: (column, Ranking.of_curve's key);
# the peak is left to the summary (an 80-column terminal keeps the sampled values whole)
NUMBERS = [("score", "score"), ("last", "metric")]


def _fmt(value: Any) -> str:
    """A value in the live table: floats to 4 significant digits."""
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.4g}"
    return str(value)


def _fmt_number(value: Any) -> str:
    """A number in the live table; none yet: -."""
    return "-" if value is None else _fmt(value)


def _unmeasured(value: Any) -> bool:
    """No number: None, or NaN (RLlib's mean over no finished episode)."""
    try:
        return value is None or math.isnan(value)
    except TypeError:
        return False


def whole(value: Any) -> str:
    """A value in a piped line, whole: a float as repr writes it (it reads back the same),
    a string as is (as JSON where it holds a tab or a line break), a list or dict as JSON;
    no value: -. A numpy scalar (Tune's metrics) as the Python number it holds."""
    if value is None:
        return "-"
    if getattr(value, "shape", None) == () and callable(getattr(value, "item", None)):
        value = value.item()
    if isinstance(value, bool | int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value) if re.search(r"[\t\r\n]", value) else value
    return json.dumps(value, separators=(",", ":"), default=str)


def numbers_caption(ranking: Ranking) -> str:
    """What the table's numbers are, under it: the score's source, then the metric."""
    metric = metric_column(ranking.metric)
    if ranking.final_key:
        score = f"final deterministic {metric} at the budget (- before it)"
    else:
        score = f"{metric}, {ranking.scope}"
    where = "of the last evaluation" if ranking.metric.startswith("evaluation/") else "in training"
    return f"score: {score}; last: {metric} {where}"


def metric_column(metric: str) -> str:
    """The metric's column title: its last part ('episode_return_mean'), with its group
    for one agent's or policy's return ('agent_episode_returns_mean/cart_0')."""
    parts = metric.split("/")
    return "/".join(parts[-2:]) if parts[-2:-1] in PER_ID_GROUPS else parts[-1]


def fold_header(header: str, width: int) -> str:
    """A header on lines of at most `width` cells where it can be broken after a `_`, `/`,
    `-` or space (a part longer than `width` keeps its own line): every character kept."""
    parts = re.findall(r"[^_/\- ]*[_/\- ]|[^_/\- ]+$", header) or [header]
    lines = [""]
    for part in parts:
        if lines[-1] and cell_len(lines[-1] + part) > width:
            lines.append("")
        lines[-1] += part
    return "\n".join(line.rstrip(" ") for line in lines)


def _table_width(console: Console, table: Table) -> int:
    """The width the table needs with every cell whole on its lines."""
    return Measurement.get(console, console.options.update_width(1_000_000), table).maximum


def _build(
    headers: list[str], rows: list[list[str]], compact: bool = False, caption: str | None = None
) -> Table:
    table = Table(
        title="trials",
        caption=caption,
        expand=False,
        box=box.SIMPLE_HEAD if compact else box.HEAVY_HEAD,
        padding=(0, 1),
        show_edge=not compact,
    )
    for i, header in enumerate(headers):
        # fold, never "…": a column narrower than a header or value breaks it over lines
        table.add_column(header, justify="left" if i == 0 else "right", overflow="fold")
    for row in rows:
        table.add_row(*row)
    return table


def layout(
    console: Console,
    headers: list[str],
    rows: list[list[str]],
    fixed: int,
    caption: str | None = None,
) -> Table:
    """The trials table for the console's width, the first that fits:

    1. boxed, every header and value on one line;
    2. boxed, each header wider than its column's values folded after its `_`, `/`, `-`
       or space (episode_ / return_ / mean);
    3. as 2 without the box's lines;
    4. as 3, with the columns after the first `fixed` (the sampled values) as one last
       column of `key=value` pairs, which wraps between pairs.

    Narrower still, rich narrows the columns of 4 and folds what does not fit, headers
    and values alike: a name may break, it is never cut short ("…"). The caption wraps
    under the table."""
    folded = [
        fold_header(h, max(max((cell_len(r[i]) for r in rows), default=0), 4))
        for i, h in enumerate(headers)
    ]
    for names, compact in ((headers, False), (folded, False), (folded, True)):
        table = _build(names, rows, compact=compact, caption=caption)
        if _table_width(console, table) <= console.width:
            return table
    if len(headers) <= fixed:
        return table
    pairs = [
        " ".join(f"{k}={v}" for k, v in zip(headers[fixed:], r[fixed:], strict=True)) for r in rows
    ]
    table = _build(
        [*folded[:fixed], "config"],
        [[*r[:fixed], p] for r, p in zip(rows, pairs, strict=True)],
        compact=True,
        caption=caption,
    )
    table.columns[-1].justify = "left"
    return table


class RichProgress(Callback):
    """Shows status, iteration, env steps, score, last and sampled values of every
    trial: a live table on a terminal, one plain line per finished trial elsewhere.

    Args:
        ranking: How the sweep scores a trial (tuner.sweep's sweep_ranking): the numbers
            are computed from each trial's curve as the store and the page compute them.
        space_keys: The sampled keys, a column each.
        stderr: Progress on stderr (`--output json` keeps stdout for JSON).
        console: Where to draw (default: stdout or stderr's own).
    """

    def __init__(
        self,
        ranking: Ranking,
        space_keys: list[str],
        stderr: bool = False,
        console: Console | None = None,
    ) -> None:
        self.ranking = ranking
        self.space_keys = space_keys
        self.stderr = stderr
        self.rows: dict[str, dict[str, Any]] = {}
        self.printed: set[str] = set()  # trials whose piped line is out
        self._console = console
        self._live: Live | None = None

    def __getstate__(self) -> dict[str, Any]:
        # Tune pickles callbacks into its experiment state: leave the terminal out.
        state = self.__dict__.copy()
        state["_live"] = None
        state["_console"] = None
        return state

    @property
    def console(self) -> Console:
        """Where progress goes: stdout, or stderr (`--output json` keeps stdout for JSON)."""
        if self._console is None:
            self._console = Console(stderr=self.stderr)
        return self._console

    def _row(self, trial: Any) -> dict[str, Any]:
        from tuner.sweep._tuner import sampled_values

        if trial.trial_id not in self.rows:
            self.rows[trial.trial_id] = {
                "status": trial.status,
                "iter": 0,
                "steps": 0,
                "curve": [],
                "sampled": sampled_values(trial.config, self.space_keys),
            }
        return self.rows[trial.trial_id]

    def _add_point(self, row: dict[str, Any], result: dict) -> None:
        """A result's values on the trial's curve."""
        iteration = result.get(ITERATION_KEY, 0)
        steps = int(result.get(STEP_KEY) or 0)
        values = {}
        for key in self.ranking.keys:
            value = lookup(result, key)
            if not _unmeasured(value):
                values[key] = float(value)
        # a result again for an iteration (a retry or resume trains it again) replaces it
        row["curve"] = [p for p in row["curve"] if p[0] < iteration] + [(iteration, steps, values)]
        row.update(iter=iteration, steps=steps)

    def _numbers(self, row: dict[str, Any]) -> list[Any]:
        """The row's score and last, from its curve as the store computes them (when
        drawn: piped, once a trial)."""
        numbers = self.ranking.of_curve(row["curve"])
        return [numbers.get(key) for _, key in NUMBERS]

    def _table(self) -> Table:
        headers = [*FIXED_COLUMNS, *(name for name, _ in NUMBERS), *self.space_keys]
        rows = [
            [
                trial_id,
                str(row["status"]),
                str(row["iter"]),
                str(row["steps"]),
                *(_fmt_number(value) for value in self._numbers(row)),
                *(_fmt(row["sampled"].get(k)) for k in self.space_keys),
            ]
            for trial_id, row in sorted(self.rows.items())
        ]
        fixed = len(FIXED_COLUMNS) + len(NUMBERS)
        return layout(self.console, headers, rows, fixed, numbers_caption(self.ranking))

    def _line(self, cells: list[str]) -> None:
        out = self.console.file
        out.write("\t".join(cells) + "\n")  # as is: rich would expand the tabs
        out.flush()

    def _print_finished(self, trial_ids: list[str]) -> None:
        """Piped: each of these trials' line, once (the header before the first)."""
        for trial_id in trial_ids:
            if trial_id in self.printed:
                continue
            if not self.printed:
                self._line([*FIXED_COLUMNS, *(name for name, _ in NUMBERS), *self.space_keys])
            row = self.rows[trial_id]
            self._line(
                [
                    trial_id,
                    str(row["status"]),
                    whole(row["iter"]),
                    whole(row["steps"]),
                    *(whole(value) for value in self._numbers(row)),
                    *(whole(row["sampled"].get(k)) for k in self.space_keys),
                ]
            )
            self.printed.add(trial_id)

    def _refresh(self) -> None:
        if not self.console.is_terminal:
            return
        if self._live is None:
            self._live = Live(
                self._table(),
                console=self.console,
                refresh_per_second=2,
                transient=False,
            )
            self._live.start()
        self._live.update(self._table())

    def _ended(self, trial: Any, status: str) -> None:
        self._row(trial)["status"] = status
        if self.console.is_terminal:
            self._refresh()
        else:
            self._print_finished([trial.trial_id])

    def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._row(trial)["status"] = TrialStatus.RUNNING
        self._refresh()

    def on_trial_result(
        self, iteration: int, trials: list, trial: Any, result: dict, **info: Any
    ) -> None:
        row = self._row(trial)
        row["status"] = TrialStatus.RUNNING
        # an iteration in which no episode ended reports NaN: the last measured value is
        # carried (as the ranking carries it), no number until one is measured
        self._add_point(row, result)
        self._refresh()

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._ended(trial, TrialStatus.TERMINATED)

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._ended(trial, TrialStatus.ERROR)

    def on_experiment_end(self, trials: list, **info: Any) -> None:
        for trial in trials:
            row = self._row(trial)
            row["status"] = trial.status
            last = trial.last_result or {}
            if last.get(ITERATION_KEY, 0) > row["iter"]:  # finished before a resume
                self._add_point(row, last)
        if not self.console.is_terminal:
            # the trials that ended without a line (stopped, or finished before a resume)
            self._print_finished(sorted(self.rows))
            return
        if self._live is None:
            self._refresh()
        if self._live is not None:
            self._live.update(self._table())
            self._live.stop()
            self._live = None
