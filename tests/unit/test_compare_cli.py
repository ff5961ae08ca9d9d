"""`tuner compare`'s text: how many ids it takes and how it says so, and a value a
sweep's best config lacks printed as a bare -."""

from __future__ import annotations

import io

import pytest
from rich.console import Console
from typer.testing import CliRunner

from tuner.cli import _remote, app
from tuner.compare import MOST


def _sweep(sweep_id: str, config: dict) -> dict:
    return {
        "id": sweep_id,
        "name": f"sweep-{sweep_id}",
        "status": "SUCCEEDED",
        "scope": "last",
        "best": {"trial_id": "t", "config": config, "metric_value": 20.0},
        "confirmed": None,
        "mlflow": None,
    }


COMPARISON = {
    "sweeps": [_sweep("a1", {"lr": 0.001, "act": "relu"}), _sweep("b2", {"lr": 0.0003})],
    "keys": ["act", "lr"],
    "differing_keys": ["act", "lr"],
}


@pytest.fixture
def asked(monkeypatch) -> list[str]:
    """The paths the CLI asked the service for (none when it refused the ids first)."""
    paths: list[str] = []

    def call(method: str, url: str | None, path: str, **kwargs: object) -> dict:
        paths.append(path)
        return COMPARISON

    monkeypatch.setattr(_remote, "_call", call)
    return paths


@pytest.mark.parametrize("ids", [["a1"], ["a1", "b2", "c3", "d4", "e5"]])
def test_compare_asks_for_space_separated_ids_in_the_range_it_takes(asked, ids):
    result = CliRunner().invoke(app, ["compare", *ids])
    assert result.exit_code == 2
    text = " ".join(result.output.split())
    assert f"give 2 to {MOST} sweep ids, space-separated (got {len(ids)})" in text
    assert "comma" not in text
    assert asked == []


def test_compare_names_an_id_given_twice(asked):
    result = CliRunner().invoke(app, ["compare", "a1", "a1"])
    assert result.exit_code == 2
    assert "distinct sweep ids, space-separated (a1 given more than once)" in result.output
    assert asked == []


def test_compare_help_states_the_arity_of_the_code():
    result = CliRunner().invoke(app, ["compare", "--help"])
    assert f"2 to {MOST} sweep ids, space-separated" in " ".join(result.output.split())


def test_a_missing_value_prints_as_a_bare_dash_piped_and_on_a_terminal(asked, monkeypatch):
    result = CliRunner().invoke(app, ["compare", "a1", "b2"])
    assert result.exit_code == 0, result.output
    assert asked == ["/compare"]
    lines = result.stdout.splitlines()
    assert 'act *\t"relu"\t-' in lines  # present values stay JSON, a missing one is -
    assert "lr *\t0.001\t0.0003" in lines
    assert '"-"' not in result.stdout

    term = Console(file=io.StringIO(), width=80, force_terminal=True, color_system=None)
    monkeypatch.setattr(_remote, "out_console", lambda: term)
    assert CliRunner().invoke(app, ["compare", "a1", "b2"]).exit_code == 0
    text = term.file.getvalue()
    assert '"-"' not in text
    (act,) = [line for line in text.splitlines() if "act *" in line]
    assert [cell.strip() for cell in act.split("│")[1:4]] == ["act *", '"relu"', "-"]
