"""`tuner run`'s progress (tuner/sweep/_progress.py): piped, one whole tab-separated line
per finished trial and no live table; on a terminal, a live table whose headers are never
cut short ("episode_return_me…"), whatever the width. Its numbers are the page's, under
the page's names: score and last."""

from __future__ import annotations

import io
import pickle
import re
from types import SimpleNamespace

import numpy as np
import pytest
from rich.console import Console

from tuner.sweep._progress import RichProgress, fold_header, numbers_caption, whole
from tuner.tracking import Ranking

METRIC = "env_runners/episode_return_mean"
LAST = Ranking(METRIC, "max", "last")  # scored by the last value: score == last
# PPO's default space is about this wide: far more than 80 columns as one boxed table
KEYS = [
    "lr",
    "gamma",
    "lambda",
    "clip_param",
    "num_epochs",
    "minibatch_size",
    "entropy_coeff",
    "vf_loss_coeff",
]
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
BOX = set("━─┏┓┗┛┳┻╋┡┩╇┃│└┘┴┬┼├┤┌┐╭╮╰╯ ")


def config(i: int) -> dict:
    return {
        "lr": 0.00031622776601683794 * (i + 1),
        "gamma": 0.99,
        "lambda": 0.95,
        "clip_param": 0.2,
        "num_epochs": 10,
        "minibatch_size": 256,
        "entropy_coeff": 0.0,
        "vf_loss_coeff": [0.5, 1],  # a list: JSON when piped
    }


def trial(i: int) -> SimpleNamespace:
    return SimpleNamespace(
        trial_id=f"96c77_{i:05d}", status="PENDING", config=config(i), last_result={}
    )


def result(i: int) -> dict:
    return {
        "training_iteration": 3,
        "num_env_steps_sampled_lifetime": 12000 + i,
        "env_runners": {"episode_return_mean": np.float64(123.456789 * (i + 1))},
    }


def run(progress: RichProgress, after_each=None) -> list[SimpleNamespace]:  # noqa: ANN001
    """Three trials: the first two finish (one in error), the third is still running
    when the sweep ends (stopped)."""
    trials = [trial(i) for i in range(3)]
    for i, t in enumerate(trials):
        progress.on_trial_start(0, trials, t)
        progress.on_trial_result(0, trials, t, result(i))
        if i == 0:
            t.status = "TERMINATED"
            progress.on_trial_complete(0, trials, t)
        elif i == 1:
            t.status = "ERROR"
            progress.on_trial_error(0, trials, t)
        if after_each:
            after_each(i)
    trials[2].status = "TERMINATED"
    progress.on_experiment_end(trials)
    return trials


def test_piped_progress_is_a_whole_tab_separated_line_per_finished_trial():
    out = io.StringIO()
    console = Console(file=out, width=80)  # a file, not a terminal
    assert not console.is_terminal
    progress = RichProgress(LAST, KEYS, console=console)
    seen: list[int] = []
    run(progress, after_each=lambda i: seen.append(len(out.getvalue().splitlines())))
    # a line as each trial finishes (a header before the first); nothing while one runs
    assert seen == [2, 3, 3]
    text = out.getvalue()
    assert not ANSI.search(text)
    assert not set(text) & (BOX - {" "})
    assert "…" not in text
    lines = [line.split("\t") for line in text.splitlines()]
    assert lines[0] == ["trial", "status", "iter", "env steps", "score", "last", *KEYS]
    assert [line[:6] for line in lines[1:]] == [
        ["96c77_00000", "TERMINATED", "3", "12000", *["123.456789"] * 2],
        ["96c77_00001", "ERROR", "3", "12001", *["246.913578"] * 2],
        ["96c77_00002", "TERMINATED", "3", "12002", *["370.370367"] * 2],
    ]
    # every value whole, as Python reads it back: no 4-digit rounding, lists as JSON
    assert lines[1][6:] == ["0.00031622776601683794", "0.99", "0.95", "0.2", "10", "256"] + [
        "0.0",
        "[0.5,1]",
    ]
    assert float(lines[2][6]) == 0.00031622776601683794 * 2
    assert all(len(line) == 6 + len(KEYS) for line in lines)


def test_whole_values():
    assert whole(None) == "-"
    assert whole(float("nan")) == "nan"
    assert whole(1e-12) == "1e-12"
    assert whole(True) == "True"
    assert whole(7) == "7"
    assert whole("relu") == "relu"
    assert whole("a\tb") == '"a\\tb"'
    assert whole({"fcnet_hiddens": [64, 64]}) == '{"fcnet_hiddens":[64,64]}'
    # Tune's results hold numpy numbers: written as the numbers they are
    assert whole(np.float64(16.0)) == "16.0"
    assert whole(np.int64(128)) == "128"
    assert whole(np.float32(0.1)) == repr(float(np.float32(0.1)))


def header_tokens(rendered: str) -> list[str]:
    """The words of a rendered table's header: the lines between its title (and top
    border) and the rule below the header."""
    lines = [ANSI.sub("", line) for line in rendered.splitlines()]
    start = next(i for i, line in enumerate(lines) if line.strip() == "trials") + 1
    while set(lines[start]) <= BOX:
        start += 1
    end = next(i for i in range(start, len(lines)) if set(lines[i]) <= BOX)
    block = " ".join(lines[start:end])
    return re.sub(r"[┃│]", " ", block).split()


def parts(name: str) -> list[str]:
    return re.findall(r"[^_/\- ]*[_/\- ]|[^_/\- ]+$", name)


@pytest.mark.parametrize("width", [80, 100, 200])
def test_terminal_table_never_cuts_a_header(width):
    out = io.StringIO()
    console = Console(file=out, width=width, force_terminal=True, color_system=None)
    progress = RichProgress(LAST, KEYS, console=console)
    run(progress)
    live = ANSI.sub("", out.getvalue())
    assert "\t" not in live
    assert "…" not in live  # the live table, never cut
    assert "96c77_00002" in live
    assert "TERMINATED" in live
    # the table as the live display drew it last, at this width
    final = Console(file=io.StringIO(), width=width, force_terminal=True, color_system=None)
    final.print(progress._table())
    drawn = final.file.getvalue()
    assert "…" not in drawn
    assert max(len(ANSI.sub("", line)) for line in drawn.splitlines()) <= width
    names = ["trial", "status", "iter", "env steps", "score", "last", *KEYS]
    tokens = header_tokens(drawn)
    # each header word whole, broken (if at all) only after a _ / - or space: no
    # "episode_return_me…", no "episo" + "de_return"
    whole_runs = {
        "".join(p[i:j]).strip()
        for name in names
        for p in [parts(name)]
        for i in range(len(p))
        for j in range(i + 1, len(p) + 1)
    }
    assert set(tokens) <= whole_runs | {"config"}, tokens
    assert {"score", "last"} <= set(tokens)
    # what the numbers are, under the table
    caption = " ".join(drawn.split())
    assert "score: episode_return_mean, last; last: episode_return_mean in training" in caption
    if "config" in tokens:  # the sampled values as key=value pairs, each pair whole
        for key in KEYS:
            assert re.search(rf"(^|\s){key}=\S+", drawn)
    else:
        assert set(KEYS) <= set(tokens)


@pytest.mark.parametrize(
    ("width", "header"),
    [
        (120, ["trial", "status", "iter", "env", "steps", "score", "last", "lr"]),
        # 72: "env steps" folds at its space, the table keeps its box
        (72, ["env", "trial", "status", "iter", "steps", "score", "last", "lr"]),
    ],
)
def test_terminal_table_with_one_sampled_value(width, header):
    console = Console(file=io.StringIO(), width=width, force_terminal=True, color_system=None)
    progress = RichProgress(LAST, ["lr"], console=console)
    run(progress)
    final = Console(file=io.StringIO(), width=width, force_terminal=True, color_system=None)
    final.print(progress._table())
    drawn = final.file.getvalue()
    assert header_tokens(drawn) == header
    assert "┃" in drawn
    assert "…" not in drawn
    assert "0.0003162" in drawn  # on a terminal, 4 significant digits


def test_fold_header_keeps_every_character():
    assert fold_header("episode_return_mean", 8) == "episode_\nreturn_\nmean"
    assert fold_header("agent_episode_returns_mean/cart_0", 14) == (
        "agent_episode_\nreturns_mean/\ncart_0"
    )
    assert fold_header("env steps", 5) == "env\nsteps"
    assert fold_header("lr", 1) == "lr"


def test_progress_pickles_without_its_console():
    """Tune pickles callbacks into its experiment state: the console stays out."""
    progress = RichProgress(LAST, KEYS, console=Console(file=io.StringIO()))
    run(progress)
    back = pickle.loads(pickle.dumps(progress))
    assert back.rows.keys() == progress.rows.keys()
    assert back._console is None


def test_an_iteration_without_an_episode_keeps_the_last_measured_value():
    """RLlib reports NaN for an iteration in which no episode ended (LunarLander's long
    episodes): the line shows the last value measured, NaN only if none was."""
    out = io.StringIO()
    progress = RichProgress(LAST, KEYS, console=Console(file=out, width=80))
    trials = [trial(0), trial(1)]
    values = {0: [12.5, float("nan")], 1: [float("nan"), float("nan")]}
    for t in trials:
        progress.on_trial_start(0, trials, t)
        for i, value in enumerate(values[int(t.trial_id[-1])]):
            progress.on_trial_result(
                0,
                trials,
                t,
                {
                    **result(0),
                    "training_iteration": i + 1,
                    "env_runners": {"episode_return_mean": value},
                },
            )
        t.status = "TERMINATED"
        progress.on_trial_complete(0, trials, t)
    lines = [line.split("\t") for line in out.getvalue().splitlines()]
    assert [line[5] for line in lines[1:]] == ["12.5", "-"]


def test_the_score_is_the_final_evaluation_at_the_budget_beside_the_training_return():
    """With a final deterministic evaluation (evaluation.at_end), `score` is it, once the
    trial ran its budget, and `-` before; `last` stays the training metric's."""
    ranking = Ranking(METRIC, "max", "last", final_key=f"evaluation/{METRIC}", budget_steps=2000)
    out = io.StringIO()
    progress = RichProgress(ranking, ["lr"], console=Console(file=out, width=120))
    trials = [trial(0), trial(1)]
    points = {
        0: [(1000, 30.0, None), (2000, 20.0, 500.0)],  # ran its budget: evaluated
        1: [(1000, 40.0, None)],  # stopped early by a scheduler: no score
    }
    for t in trials:
        progress.on_trial_start(0, trials, t)
        for i, (steps, ret, final) in enumerate(points[int(t.trial_id[-1])]):
            res = {
                "training_iteration": i + 1,
                "num_env_steps_sampled_lifetime": steps,
                "env_runners": {"episode_return_mean": ret},
            }
            if final is not None:
                res["evaluation"] = {"env_runners": {"episode_return_mean": final}}
            progress.on_trial_result(0, trials, t, res)
        t.status = "TERMINATED"
        progress.on_trial_complete(0, trials, t)
    lines = [line.split("\t") for line in out.getvalue().splitlines()]
    assert [line[4:6] for line in lines[1:]] == [["500.0", "20.0"], ["-", "40.0"]]


def test_the_caption_names_the_final_evaluation():
    ranking = Ranking(METRIC, "max", "last", final_key=f"evaluation/{METRIC}", budget_steps=2000)
    console = Console(file=io.StringIO(), width=120, force_terminal=True, color_system=None)
    progress = RichProgress(ranking, ["lr"], console=console)
    run(progress)
    final = Console(file=io.StringIO(), width=120, force_terminal=True, color_system=None)
    final.print(progress._table())
    said = " ".join(final.file.getvalue().split())
    assert "score: final deterministic episode_return_mean at the budget (- before it)" in said


def test_the_caption_says_an_evaluation_metric_comes_from_the_last_evaluation():
    ranking = Ranking(f"evaluation/{METRIC}", "max", "last")
    said = numbers_caption(ranking)
    assert said.endswith("last: episode_return_mean of the last evaluation")
    assert "in training" not in said
