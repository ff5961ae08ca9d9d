"""The MLflow UI links tuner prints: the runs table and a run's page, both asking for the
UI's model-training view in the query of the hash route (MLflow 3.17 opens the GenAI view
otherwise; tests/e2e/test_mlflow_ui.py checks what a browser shows)."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

from tuner.mlflow_names import experiment_url, run_url

UI = "http://127.0.0.1:5000"


def hash_route(url: str) -> tuple[str, dict[str, list[str]]]:
    """(path, query) of the route after the '#', checking nothing sits before it."""
    parts = urlsplit(url)
    assert parts.query == "", url
    assert parts.path == "/", url  # a query before '#' goes unread
    path, _, query = parts.fragment.partition("?")
    return path, parse_qs(query)


def test_an_experiment_link_opens_its_runs_table_in_the_model_training_view():
    url = experiment_url(UI + "/", "7")
    assert url == f"{UI}/#/experiments/7/runs?workflowType=machine_learning"
    assert hash_route(url) == ("/experiments/7/runs", {"workflowType": ["machine_learning"]})


def test_a_run_link_opens_the_run_page_in_the_model_training_view():
    url = run_url(UI, "7", "abc123")
    assert url == f"{UI}/#/experiments/7/runs/abc123?workflowType=machine_learning"
    assert hash_route(url) == (
        "/experiments/7/runs/abc123",
        {"workflowType": ["machine_learning"]},
    )


def test_no_link_without_a_ui_an_experiment_or_a_run():
    for ui, exp in [(None, "7"), ("", "7"), (UI, None), (UI, "")]:
        assert experiment_url(ui, exp) is None
        assert run_url(ui, exp, "r") is None
    assert run_url(UI, "7", None) is None
    assert run_url(UI, "7", "") is None
