"""The MLflow links tuner prints, opened in a real browser (Debian's Chromium via
Playwright) on a real `mlflow server`: the experiment link lands on the runs table and the
run link on the run's page, both in the UI's model-training view. MLflow 3.17 opens a
plain `#/experiments/<id>/runs/<run>` link in its GenAI view (Overview, Sessions, Judges,
an "Evaluations" breadcrumb), tagged experiment or not."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.e2e.conftest import ARTIFACTS, free_port
from tests.e2e.test_browser import browser  # noqa: F401 - fixture
from tuner import mlflow_names as names
from tuner.mlflow_names import experiment_url, run_url

pytestmark = pytest.mark.e2e
MLFLOW = Path(sys.executable).with_name("mlflow")
# in the GenAI view's navigation or breadcrumb only (its "Traces" is in both views)
GENAI_ONLY = ("Observability", "Sessions", "Judges", "Evaluation runs", "Evaluations")


@pytest.fixture(scope="module")
def mlflow_ui(tmp_path_factory):
    """`mlflow server` on a free port and a tmp dir, in its own process group."""
    root = tmp_path_factory.mktemp("mlflow-ui")
    port = free_port()
    log = root / "server.log"
    proc = subprocess.Popen(
        [
            str(MLFLOW),
            "server",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            "1",
            "--backend-store-uri",
            f"sqlite:///{root / 'mlflow.db'}",
            "--default-artifact-root",
            (root / "artifacts").as_uri(),
        ],
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 240
        while True:
            assert proc.poll() is None, log.read_text()[-3000:]
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.time() < deadline, log.read_text()[-3000:]
            time.sleep(0.5)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # the server and the workers it started
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
        try:  # job consumers that outlived the server
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


@pytest.fixture(scope="module")
def sweep(mlflow_ui):
    """An experiment as tuner makes one: a parent run and a nested child run, each with a
    param and a metric. Returns (experiment id, parent run id, child run id)."""
    from mlflow import MlflowClient

    client = MlflowClient(mlflow_ui)
    exp = client.create_experiment(
        "ui-sweep", tags={names.TAG_EXPERIMENT_KIND: names.EXPERIMENT_KIND}
    )
    parent = client.create_run(exp, run_name="ui-sweep-parent").info.run_id
    client.log_param(parent, "lr", "0.001")
    client.log_metric(parent, "reward", 1.5)
    child = client.create_run(
        exp, run_name="ui-sweep-child", tags={names.TAG_PARENT: parent}
    ).info.run_id
    client.log_param(child, "lr", "0.002")
    client.log_metric(child, "reward", 2.5)
    for run in (child, parent):
        client.set_terminated(run)
    return exp, parent, child


def open_link(chromium, url: str, shows: str, shot: str):
    """Opens url in a fresh context (no view remembered from an earlier page), checks the
    navigation is the model-training view's and waits until the page shows `shows`;
    returns (page, body text)."""
    context = chromium.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    page.goto(url)
    ARTIFACTS.mkdir(exist_ok=True)
    # the sidebar settles on one view: Model registry in model training, Judges in GenAI
    page.wait_for_function(
        """() => [...document.querySelectorAll('nav')].some(n =>
               /Model registry|Judges/.test(n.innerText))""",
        timeout=90_000,
    )
    nav = " | ".join(page.locator("nav").all_inner_texts()).replace("\n", " | ")
    if "Model registry" not in nav:
        page.screenshot(path=str(ARTIFACTS / shot))
    assert "Model registry" in nav, f"not model training: {nav}"
    assert "Runs" in nav, f"not model training: {nav}"
    page.get_by_text(shows, exact=True).first.wait_for(timeout=90_000)
    page.screenshot(path=str(ARTIFACTS / shot))
    body = page.inner_text("body")
    shown = [word for word in GENAI_ONLY if word in body]
    assert shown == [], f"GenAI view: {shown} on the page; navigation: {nav}"
    return page, body


def test_the_experiment_link_opens_the_runs_table_in_the_model_training_view(
    mlflow_ui,
    sweep,
    browser,  # noqa: F811
):
    exp, _, _ = sweep
    page, body = open_link(
        browser, experiment_url(mlflow_ui, exp), "ui-sweep-parent", "mlflow-experiment.png"
    )
    assert "/runs" in page.url.partition("#")[2]  # the runs table, not the overview
    assert "Run Name" in body
    assert "2 matching runs" in body  # the table, parent + child
    page.context.close()


@pytest.mark.parametrize("which", ["parent", "child"])
def test_a_run_link_opens_the_run_page_in_the_model_training_view(
    mlflow_ui,
    sweep,
    browser,  # noqa: F811
    which,
):
    exp, parent, child = sweep
    run = parent if which == "parent" else child
    page, body = open_link(
        browser, run_url(mlflow_ui, exp, run), f"ui-sweep-{which}", f"mlflow-{which}-run.png"
    )
    assert page.get_by_role("heading", name=f"ui-sweep-{which}").is_visible()
    assert "Parameters (1)" in body
    assert "lr" in body
    assert run in body
    assert ("Child runs" if which == "parent" else "Parent run") in body
    page.context.close()
