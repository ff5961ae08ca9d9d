"""`tuner validate` / `tuner schema`, and every example spec stays valid."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from tuner.cli import app
from tuner.spec import SpecError, load_spec
from tuner.validation import validate_spec

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "experiments").glob("*.yaml"))
# The example user code (experiments/tuner_examples): a spec naming it runs only where the
# operator allows it, as `tuner run ... --allow-module tuner_examples` does.
EXAMPLE_CODE = "tuner_examples"
runner = CliRunner()


def names_example_code(path: Path) -> bool:
    return EXAMPLE_CODE in path.read_text()


def test_there_is_an_example_per_algorithm_and_preset():
    from tuner.spec import ALGORITHMS, PRESETS

    named = {load_spec(p).algorithm for p in EXAMPLES}
    assert set(ALGORITHMS) | set(PRESETS) <= named


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_specs_validate(path):
    spec = load_spec(path)
    warnings = validate_spec(spec, allowed_modules=[EXAMPLE_CODE])
    if EXAMPLE_CODE in path.read_text():  # names example code: refused unless allowed
        with pytest.raises(SpecError):
            validate_spec(spec, build_env=False, allowed_modules=[])
    assert ("noisy" in " ".join(warnings)) == (spec.algorithm in {"Noisy_DQN", "Rainbow_DQN"})
    assert spec.resources.num_env_runners <= 1  # fits this 2-core machine


GPU_EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "experiments" / "gpu").glob("*.yaml"))


@pytest.mark.parametrize("path", GPU_EXAMPLES, ids=lambda p: p.name)
def test_gpu_examples_validate_and_ask_for_a_gpu_share(path):
    spec = load_spec(path)
    validate_spec(spec)  # schema, RLlib keys and the env itself; the fit needs the GPU
    assert 0 < spec.resources.num_gpus_per_learner < 1  # packed: the point of the example


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_example_confirms_its_best_configs_on_fresh_seeds(path):
    """The examples show the answer worth trusting (issue #10): own training loops,
    multi-agent and PB2 sweeps confirm too, so no example is exempt."""
    confirm = load_spec(path).confirm
    assert confirm is not None, f"{path.name} has no `confirm:`"
    assert confirm.top_k >= 1
    assert confirm.seeds >= 2  # a spread needs two seeds


@pytest.mark.parametrize(
    "path", [p for p in EXAMPLES if names_example_code(p)], ids=lambda p: p.name
)
def test_examples_naming_example_code_need_its_module_allowed(path, monkeypatch):
    for name in ("TUNER_ALLOWED_MODULES", "TUNER_ENV_MODULES"):
        monkeypatch.delenv(name, raising=False)
    refused = runner.invoke(app, ["validate", str(path), "--no-fit"])
    assert refused.exit_code == 2
    assert EXAMPLE_CODE in refused.output
    assert f"--allow-module {EXAMPLE_CODE}" in path.read_text()  # the spec says how to run it
    allowed = runner.invoke(
        app, ["validate", str(path), "--no-fit", "--allow-module", EXAMPLE_CODE]
    )
    assert allowed.exit_code == 0, allowed.output
    assert f"{path}: ok" in allowed.output


def test_there_is_a_multi_agent_example():
    examples = [load_spec(p) for p in EXAMPLES]
    multi = [s for s in examples if s.multi_agent is not None]
    assert multi
    assert all(len(s.multi_agent.policies) > 1 for s in multi)
    assert any(s.metric.startswith("env_runners/agent_episode_returns_mean/") for s in multi)


def test_validate_prints_field_path_and_value(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        yaml.safe_dump(
            {
                "name": "x",
                "algorithm": "PPO",
                "env": "CartPole-v1",
                "search": {"space": {"lr": {"uniform": [0.1, 0.01]}}},
                "config": {"lr_typo": 3},
            }
        )
    )
    result = runner.invoke(app, ["validate", str(bad)])
    assert result.exit_code == 2
    assert "search.space.lr" in result.output
    assert "[0.1, 0.01]" in result.output


def test_validate_ok_and_warning():
    result = runner.invoke(app, ["validate", "experiments/rainbow-dqn-cartpole.yaml"])
    assert result.exit_code == 0
    assert "ok" in result.output
    assert "noisy" in result.output


def test_schema_command():
    result = runner.invoke(app, ["schema"])
    assert result.exit_code == 0
    assert json.loads(result.output)["title"] == "ExperimentSpec"


def test_run_rejects_bad_output_flag():
    result = runner.invoke(app, ["run", "experiments/cartpole-ppo.yaml", "--output", "xml"])
    assert result.exit_code == 2
    assert "--output" in result.output


@pytest.mark.parametrize(
    "name, value",
    [
        ("TUNER_STORAGE_PATH", "s3://bucket/tune?endpoint_override=localhost:9000"),
        ("TUNER_MAX_ATTEMPTS", "0"),
    ],
)
def test_a_bad_setting_is_named_not_a_traceback(name, value, tmp_path):
    import os
    import subprocess
    import sys

    spec = Path(__file__).parents[2] / "experiments" / "cartpole-ppo.yaml"
    env = {**os.environ, name: value, "TUNER_DATA_DIR": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-m", "tuner.cli", "run", str(spec)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert out.returncode == 2
    assert name in out.stderr, out.stderr
    assert "Traceback" not in out.stderr, out.stderr
    assert not any(tmp_path.iterdir())  # nothing started, nothing written


def test_serve_links_to_the_mlflow_ui_it_starts(monkeypatch):
    """`tuner serve --mlflow-ui --mlflow-port 5100`: every MLflow link (the page, the API,
    the drivers' summaries, which get the setting through their job env) names :5100,
    unless TUNER_MLFLOW_UI_URL says where the UI is."""
    from tuner.cli._local import serve_settings
    from tuner.launcher import Launcher
    from tuner.settings import Settings

    monkeypatch.delenv("TUNER_MLFLOW_UI_URL", raising=False)
    served = serve_settings(Settings(), "127.0.0.1", 8000, 5100)
    assert served.mlflow_ui_url == "http://127.0.0.1:5100"
    assert Launcher(served).job_env()["TUNER_MLFLOW_UI_URL"] == "http://127.0.0.1:5100"
    assert serve_settings(Settings(), "127.0.0.1", 8000, None).mlflow_ui_url.endswith(":5000")
    monkeypatch.setenv("TUNER_MLFLOW_UI_URL", "https://mlflow.example.org")
    assert serve_settings(Settings(), "127.0.0.1", 8000, 5100).mlflow_ui_url == (
        "https://mlflow.example.org"
    )


def test_the_run_summary_names_the_score_then_the_peak_and_the_last(capsys):
    """One number, one name: `tuner run` prints the best trial's score (its ranking value
    under scope, what status, the page and the API show), then its peak and last value."""
    from tuner.cli._local import _print_summary
    from tuner.views import BestTrial, SweepSummary, TrialView

    metric = "env_runners/episode_return_mean"
    trial = TrialView(
        trial_id="t_00001", status="TERMINATED", metric=24.8, best_metric=27.61, score=25.4
    )
    summary = SweepSummary(
        name="s",
        status="SUCCEEDED",
        metric=metric,
        mode="max",
        best=BestTrial(trial_id="t_00001", config={}, full_config={}, metric_value=25.4),
        trials=[trial],
    )
    _print_summary(summary)
    out = capsys.readouterr().out
    assert f"score 25.4 (last-5-avg of {metric}), peak 27.61, last 24.8" in " ".join(out.split())


def test_status_without_a_server_names_the_url_it_tried():
    import socket

    from typer.testing import CliRunner

    from tuner.cli import app

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    result = CliRunner().invoke(app, ["status", "--url", f"http://127.0.0.1:{port}"])
    assert result.exit_code == 3
    text = " ".join(result.output.split())
    assert f"cannot reach the tuner server at http://127.0.0.1:{port}/api/v1/" in text


@pytest.mark.parametrize("example", ["cartpole-ppo-default-space.yaml", "sac-pendulum.yaml"])
def test_validate_prints_no_rllib_api_stack_notice(example):
    """RLlib logs it from AlgorithmConfig's module, and SAC's from SAC's own."""
    import subprocess
    import sys

    spec = Path(__file__).parents[2] / "experiments" / example
    out = subprocess.run(
        [sys.executable, "-m", "tuner.cli", "validate", str(spec)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "new API stack" not in out.stdout + out.stderr


def test_tables_never_cut_an_id_or_a_path():
    """At 80 columns a long checkpoint path folds onto more lines, never an ellipsis;
    piped, every value prints whole, tab-separated."""
    import io

    from rich.console import Console

    from tuner.cli._app import print_table

    path = (
        "/very/long/storage/root/"
        + "x" * 60
        + "/TunerPPO_CartPole-v1_a6657_00000/checkpoint_000002"
    )
    rows = [["a6657_00000", "TERMINATED", "25.4", path]]
    headers = ["trial", "status", "episode_return_mean", "checkpoint"]
    narrow = Console(file=io.StringIO(), force_terminal=True, width=80, color_system=None)
    print_table(narrow, headers, rows)
    text = narrow.file.getvalue()
    assert "…" not in text
    assert "a6657_00000" in text
    cells = "".join(ch for ch in text if ch not in "│┃ \n─━┏┓┗┛┡┩└┘┌┐├┤┼╇╈")
    assert path.replace(" ", "") in cells  # folded, every character kept
    piped = Console(file=io.StringIO(), force_terminal=False, width=80)
    print_table(piped, headers, rows)
    assert piped.file.getvalue().splitlines() == ["\t".join(headers), "\t".join(rows[0])]


def test_an_interrupted_sweep_shows_only_our_resume_hint(caplog):
    """Tune's own hint (`Tuner.restore(path=..., trainable=...)`) would stand next to
    ours (`tuner run --resume`); it is dropped, Tune's other warnings are not."""
    import logging

    import tuner.sweep._interrupt  # noqa: F401 - installs the filter

    tune_log = logging.getLogger("ray.tune.tune")
    with caplog.at_level(logging.WARNING, logger="ray.tune.tune"):
        tune_log.warning(
            "Experiment has been interrupted, but the most recent state was saved.\n"
            'Resume experiment with: Tuner.restore(path="/x", trainable=...)'
        )
        tune_log.warning("Trials did not complete: [t_00000]")
    assert [r.getMessage() for r in caplog.records] == ["Trials did not complete: [t_00000]"]


@pytest.mark.parametrize(
    ("args", "code", "status"), [(["status", "abc"], 2, "404"), (["stop", "abc"], 1, "501")]
)
def test_a_server_that_answers_in_html_gets_its_status_and_text_printed(
    tmp_path, args, code, status
):
    """Another server on the URL (Python's own http.server: an HTML 404 for a GET, 501 for
    a POST): the CLI prints the status and the page's text, never a traceback."""
    import http.server
    import threading
    from functools import partial

    from typer.testing import CliRunner

    from tuner.cli import app

    handler = partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        result = CliRunner().invoke(app, [*args, "--url", url])
    finally:
        server.shutdown()
        server.server_close()
    text = " ".join(result.output.split())
    assert result.exit_code == code, text
    assert f"{status}: <!DOCTYPE HTML>" in text, text
    assert "Traceback" not in text, text
