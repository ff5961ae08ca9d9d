"""The `tuner` command."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from tuner.settings import Settings
from tuner.spec import SpecError, load_spec

if TYPE_CHECKING:
    from tuner.trials import SweepSummary, TrackingConfig

app = typer.Typer(
    help="Hyperparameter tuning for RL: Ray Tune sweeps over RLlib, tracked in MLflow.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
err = Console(stderr=True)


def _print_issues(error: SpecError, path: Path) -> None:
    err.print(f"[red]{path}: {len(error.issues)} problem(s)[/red]")
    for issue in error.issues:
        err.print(f"  {issue}", markup=False, highlight=False)


@app.command()
def validate(
    file: Annotated[Path, typer.Argument(help="Spec file (YAML or JSON).")],
    env_check: Annotated[bool, typer.Option("--env/--no-env", help="Build the env once.")] = True,
) -> None:
    """Check a spec; print each problem with its field path and bad value."""
    from tuner.trials import validate_spec

    try:
        spec = load_spec(file)
        warnings = validate_spec(spec, build_env=env_check)
    except SpecError as e:
        _print_issues(e, file)
        raise typer.Exit(2) from None
    for w in warnings:
        err.print(f"[yellow]warning:[/yellow] {w}", highlight=False)
    typer.echo(f"{file}: ok ({spec.algorithm} on {spec.env}, {spec.search.method} search)")


@app.command()
def run(
    file: Annotated[Path, typer.Argument(help="Spec file (YAML or JSON).")],
    resume: Annotated[
        bool, typer.Option(help="Continue the latest interrupted run of this spec.")
    ] = False,
    output: Annotated[str, typer.Option(help="table (live progress) or json.")] = "table",
    data_dir: Annotated[
        Path | None, typer.Option(help="Where the run's data goes (default TUNER_DATA_DIR).")
    ] = None,
) -> None:
    """Run a sweep in this process (no server) and print the best trial."""
    if output not in ("table", "json"):
        err.print(f"--output: expected 'table' or 'json', got {output!r}")
        raise typer.Exit(2)
    settings = Settings(data_dir=data_dir) if data_dir else Settings()
    from tuner.trials import run_sweep

    try:
        spec = load_spec(file)
        settings.data_path.mkdir(parents=True, exist_ok=True)
        summary = run_sweep(
            spec,
            storage_path=settings.tune_storage,
            resume=resume,
            progress_to_stderr=output == "json",
            ray_address=settings.ray_address,
            tracking=tracking_config(settings),
        )
    except SpecError as e:
        _print_issues(e, file)
        raise typer.Exit(2) from None
    if output == "json":
        sys.stdout.write(json.dumps(summary.model_dump(mode="json"), indent=2) + "\n")
    else:
        _print_summary(summary)
    raise typer.Exit(0 if summary.status == "SUCCEEDED" else 1)


def tracking_config(settings: Settings) -> TrackingConfig:
    """MLflow tracking as the settings say (embedded: SQLite + artifacts in the data dir)."""
    from tuner.trials import TrackingConfig

    return TrackingConfig(
        tracking_uri=settings.tracking_uri,
        artifact_location=None if settings.mlflow_tracking_uri else settings.artifact_root,
        ui_url=settings.mlflow_ui_url,
    )


def _print_summary(summary: SweepSummary) -> None:
    out = Console()
    for w in summary.warnings:
        out.print(f"[yellow]warning:[/yellow] {w}", highlight=False)
    errored = [t for t in summary.trials if t.status == "ERROR"]
    out.print(
        f"\n[bold]{summary.name}[/bold]: {summary.status}, {len(summary.trials)} trials"
        f" ({len(errored)} errored)"
    )
    for t in errored:
        out.print(
            f"  [red]{t.trial_id}[/red]: {t.error.splitlines()[0] if t.error else ''}",
            highlight=False,
        )
    if summary.best:
        b = summary.best
        out.print(
            f"best trial {b.trial_id}: {summary.metric} = {b.metric_value:.4g} (seed {b.seed})"
        )
        out.print("config: " + json.dumps(b.config), highlight=False)
        if b.checkpoint:
            out.print(f"checkpoint: {b.checkpoint}", highlight=False)
    if summary.mlflow:
        m = summary.mlflow
        out.print(
            f"mlflow: experiment {m.experiment_id}, run {m.parent_run_id}"
            + (f", best model {m.model_version}" if m.model_version else ""),
            highlight=False,
        )
        if m.url:
            out.print(f"  {m.url}  (make mlflow-ui)", highlight=False)
    out.print(f"tune state: {summary.path}", highlight=False)


@app.command()
def evaluate(
    checkpoint: Annotated[str, typer.Argument(help="Checkpoint dir, runs:/ or models:/ URI.")],
    episodes: Annotated[int, typer.Option(min=1, help="Deterministic episodes.")] = 10,
    render_to: Annotated[
        Path | None, typer.Option(help="Save the first episode as a GIF in this folder.")
    ] = None,
    output: Annotated[str, typer.Option(help="text or json.")] = "text",
) -> None:
    """Restore a checkpoint's policy and report its mean return over N episodes."""
    from gymnasium import error as gym_error

    from tuner.trials import evaluate_checkpoint

    settings = Settings()
    try:
        result = evaluate_checkpoint(
            checkpoint, episodes=episodes, tracking_uri=settings.tracking_uri, render_to=render_to
        )
    except (FileNotFoundError, OSError, ValueError, gym_error.Error) as e:
        err.print(f"checkpoint {checkpoint!r}: {e}", markup=False, highlight=False)
        raise typer.Exit(2) from None
    if output == "json":
        typer.echo(json.dumps(result.model_dump(mode="json"), indent=2))
    else:
        typer.echo(
            f"{result.env}: mean return {result.mean_return:.4g} ± {result.std_return:.3g} "
            f"over {result.episodes} episodes"
        )


@app.command("schema")
def schema() -> None:
    """Print the spec's JSON Schema."""
    from tuner.spec import json_schema

    typer.echo(json.dumps(json_schema(), indent=2))


def main() -> None:
    """Entry point of the `tuner` console script."""
    app()


if __name__ == "__main__":
    main()
