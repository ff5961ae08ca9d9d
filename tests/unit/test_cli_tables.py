"""What the CLI prints on a narrow terminal and into a pipe: no value (id, status,
header, path) is ever cut or broken across lines; a trial's config is compact."""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console
from typer.testing import CliRunner

from tuner.cli import _remote, app
from tuner.cli._app import compact_config, print_pareto, print_table

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
CHECKPOINT = (
    "/home/someone/.tuner/ray_results/cartpole-ppo-long-name_2025-01-01_00-00-00/"
    "TunerPPO_CartPole-v1_a6657_00000_0_gamma=0.9900,lr=0.0001_2025-01-01/checkpoint_000002"
)
HEADERS = ["trial", "status", "iter", "env steps", "score", "peak", "last", "retries"]
TRIALS = [
    {
        "trial_id": f"a6657_0000{i}",
        "status": status,
        "iterations": 30,
        "env_steps": 120_000,
        "score": 25.4,
        "best_metric": 27.61,
        "metric": 24.8,
        "retries": 0,
        "config": {"lr": 0.000123456, "gamma": 0.99, "fcnet_hiddens": [64, 64], "act": "relu"},
    }
    for i, status in enumerate(["TERMINATED", "RUNNING", "ERROR"])
]
ROWS = [[t["trial_id"], t["status"], "30", "120000", "25.4", "27.61", "24.8", "0"] for t in TRIALS]


def terminal(width: int = 80) -> Console:
    return Console(file=io.StringIO(), width=width, force_terminal=True, color_system=None)


def test_compact_config_is_key_value_pairs_without_spaces_inside_a_pair():
    config = {"lr": 1e-4, "act": "relu", "hiddens": [64, 64], "note": "two words", "x": None}
    assert compact_config(config) == (
        'lr=0.0001, act=relu, hiddens=[64,64], note="two words", x=null'
    )


def test_a_narrow_terminal_keeps_statuses_and_ids_whole_with_the_config_below():
    out = terminal(80)
    print_table(out, HEADERS, ROWS, configs=[t["config"] for t in TRIALS])
    lines = out.file.getvalue().splitlines()
    assert all(len(line) <= 80 for line in lines)
    assert "…" not in "".join(lines)
    assert lines[0].split() == ["trial", "status", "iter", "env", "steps", "score", "peak"] + [
        "last",
        "retries",
    ]
    assert lines[1].strip() == "config"
    body = lines[2:]
    assert len(body) == 2 * len(TRIALS)  # two lines a trial: its row, its config
    for i, trial in enumerate(TRIALS):
        row, config = body[2 * i], body[2 * i + 1]
        assert row.split()[:2] == [trial["trial_id"], trial["status"]]
        assert config.strip() == "lr=0.000123456, gamma=0.99, fcnet_hiddens=[64,64], act=relu"


def test_a_wide_terminal_gets_one_boxed_row_a_trial():
    out = terminal(200)
    print_table(out, HEADERS, ROWS, configs=[t["config"] for t in TRIALS])
    lines = out.file.getvalue().splitlines()
    assert len(lines) == 4 + len(TRIALS)  # top, header, rule, rows, bottom
    assert "act=relu │" in lines[3]
    assert "TERMINATED" in lines[3]


def test_a_terminal_too_narrow_for_columns_prints_a_block_a_row_never_a_cut_value():
    out = terminal(40)
    rows = [[*ROWS[0][:-1], CHECKPOINT]]
    print_table(out, [*HEADERS[:-1], "checkpoint"], rows)
    lines = out.file.getvalue().splitlines()
    assert lines[0] == "a6657_00000"
    assert "  status: TERMINATED" in lines
    assert f"  checkpoint: {CHECKPOINT}" in lines  # one line, longer than the terminal


def test_piped_a_table_is_tab_separated_whole_values_whatever_the_width():
    out = Console(file=io.StringIO(), width=80)
    assert not out.is_terminal
    long_header = "env_runners/agent_episode_returns_mean/some_long_policy_name"
    print_table(out, ["trial", long_header, "checkpoint"], [["a6657_00000", "25.4", CHECKPOINT]])
    assert out.file.getvalue().splitlines() == [
        f"trial\t{long_header}\tcheckpoint",
        f"a6657_00000\t25.4\t{CHECKPOINT}",
    ]


def test_the_pareto_front_on_a_narrow_terminal_puts_each_config_below_its_member():
    members = [
        {"trial_id": f"a6657_0000{i}", "values": {"return": 10.0 - i, "time": 5.0 + i}}
        | {"config": TRIALS[i]["config"]}
        for i in range(2)
    ]
    out = terminal(60)
    print_pareto(out, members, "last")
    lines = out.file.getvalue().splitlines()
    assert lines[1].split()[:2] == ["trial", "id"]
    assert lines[2].strip() == "config"
    assert len(lines) == 3 + 2 * len(members)
    assert lines[3].split()[0] == "a6657_00000"
    assert lines[4].strip().startswith("lr=0.000123456")


def _fake_service(monkeypatch, error: str | None = None) -> None:
    exp = {
        "id": "3f2a9c0d1e4b",
        "name": "cartpole-ppo",
        "status": "SUCCEEDED",
        "error": error,
        "warnings": [],
        "metric": "env_runners/episode_return_mean",
        "spec": {"scope": "last-5-avg"},
        "best": {
            "trial_id": "a6657_00000",
            "metric_value": 25.4,
            "scope": "last-5-avg",
            "config": TRIALS[0]["config"],
            "checkpoint": CHECKPOINT,
        },
    }

    def call(method: str, url: str | None, path: str, **kwargs: object) -> dict:
        return {"items": TRIALS} if path.endswith("/trials") else exp

    monkeypatch.setattr(_remote, "_call", call)


def test_status_on_an_80_column_terminal_prints_two_lines_a_trial(monkeypatch):
    _fake_service(monkeypatch)
    monkeypatch.setenv("TTY_COMPATIBLE", "1")  # rich: a terminal, though captured
    monkeypatch.setenv("COLUMNS", "80")
    result = CliRunner().invoke(app, ["status", "3f2a9c0d1e4b"])
    assert result.exit_code == 0, result.output
    lines = ANSI.sub("", result.stdout).splitlines()
    rows = [i for i, line in enumerate(lines) if line.startswith("a6657_0000")]
    assert len(rows) == len(TRIALS)
    for i, trial in zip(rows, TRIALS, strict=True):
        assert lines[i].split()[1] == trial["status"]
        assert lines[i + 1].strip().startswith("lr=0.000123456, gamma=0.99")
    assert rows[1] - rows[0] == 2
    assert rows[2] - rows[1] == 2
    assert f"checkpoint: {CHECKPOINT}" in lines


@pytest.mark.parametrize("tty", [False, True])
def test_status_never_breaks_a_path_inside_a_line(monkeypatch, tty):
    """Piped (and on a terminal), the sweep's error and its checkpoint path print whole
    on one line each, however long."""
    error = f"RuntimeError: trial a6657_00000 failed; see {CHECKPOINT}/error.txt"
    _fake_service(monkeypatch, error=error)
    monkeypatch.setenv("COLUMNS", "80")
    if tty:
        monkeypatch.setenv("TTY_COMPATIBLE", "1")
    else:
        monkeypatch.delenv("TTY_COMPATIBLE", raising=False)
    result = CliRunner().invoke(app, ["status", "3f2a9c0d1e4b"])
    assert result.exit_code == 0, result.output
    lines = ANSI.sub("", result.stdout).splitlines()
    assert error in lines
    assert f"checkpoint: {CHECKPOINT}" in lines
    if not tty:  # piped: the trials as tab-separated lines, the config as JSON
        header = lines.index("\t".join([*HEADERS, "config"]))
        assert lines[header + 1].split("\t")[:2] == ["a6657_00000", "TERMINATED"]


LONG_NAME = "cartpole-ppo-with-asha-and-a-very-long-descriptive-name-for-the-team-board"


def _finished_sweep(monkeypatch) -> None:
    exp = {
        "id": "3f2a9c0d1e4b",
        "name": LONG_NAME,
        "status": "SUCCEEDED",
        "warnings": [],
        "mode": "max",
        "metric": "env_runners/episode_return_mean",
        "trial_counts": {"TERMINATED": 4},
        "spec": {"search": {"num_samples": 4}},
    }

    def call(method: str, url: str | None, path: str, **kwargs: object) -> dict:
        return {"items": TRIALS} if path.endswith("/trials") else exp

    monkeypatch.setattr(_remote, "_call", call)


@pytest.mark.parametrize("tty", [False, True])
def test_submit_wait_never_cuts_the_name_the_counts_or_the_score(monkeypatch, tmp_path, tty):
    _finished_sweep(monkeypatch)
    progress = Console(file=io.StringIO(), width=80, force_terminal=tty, color_system=None)
    progress.soft_wrap = _remote.err.soft_wrap  # the CLI's stderr console, on a test file
    monkeypatch.setattr(_remote, "err", progress)
    spec = tmp_path / "spec.yaml"
    spec.write_text("name: x\n")
    result = CliRunner().invoke(app, ["submit", str(spec), "--wait"])
    assert result.exit_code == 0, result.output
    text = progress.file.getvalue()
    assert "…" not in text
    lines = [line.split("\r")[-1] for line in ANSI.sub("", text).splitlines()]
    if tty:  # the name above the bar, whole; the bar's line keeps the counts and score
        assert f"{LONG_NAME} (3f2a9c0d1e4b)" in lines
        assert lines[-1].startswith("SUCCEEDED")
        assert lines[-1].endswith("4/4 score 25.4")
    else:  # piped: one line at the end
        assert lines == [f"{LONG_NAME} (3f2a9c0d1e4b): SUCCEEDED, 4/4 trials, score 25.4"]
