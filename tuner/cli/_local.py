"""Commands that work on this machine: validate, plan, run (a sweep in this process),
evaluate a checkpoint, serve the API."""

from __future__ import annotations

import errno
import json
import os
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from tuner import validation
from tuner.settings import Settings
from tuner.spec import SpecError
from tuner.statuses import TrialStatus

if TYPE_CHECKING:
    from tuner.tracking import TrackingConfig
    from tuner.views import SweepSummary

from tuner.cli._answer import answer_lines
from tuner.cli._app import (
    AllowModule,
    _allowed,
    _Ending,
    _print_issues,
    app,
    err,
    out_console,
    outcome_code,
    print_pareto,
    sampler_line,
    scheduler_line,
)


def target_nodes(settings: Settings) -> list[dict[str, float]]:
    """The nodes a spec will run on: TUNER_RAY_ADDRESS's cluster (its job server), or
    this machine (`tuner run` starts a local Ray with all its CPUs and GPUs)."""
    if settings.ray_address:
        from tuner.launcher import ClusterNodes

        nodes = ClusterNodes(settings.ray_address, settings.ray_request_timeout_s).nodes()
        if nodes is None:
            raise SpecError.one(
                "(cluster)",
                f"cannot read the nodes of {settings.ray_address}; use --no-fit to skip",
            )
        return [n["resources"] for n in nodes] + settings.growth_nodes
    import torch

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return [{"CPU": float(os.cpu_count() or 1), "GPU": float(gpus)}, *settings.growth_nodes]


FitOpt = Annotated[
    bool,
    typer.Option(
        "--fit/--no-fit",
        help="Check that one trial fits the target cluster (this machine, or "
        "TUNER_RAY_ADDRESS's); --no-fit for a spec meant for another cluster.",
    ),
]


def _checked(
    file: Path,
    settings: Settings,
    allow_module: list[str] | None,
    *,
    fit: bool,
    build_env: bool = True,
    plan: bool = False,
) -> validation.Checked:
    """The spec file through the one validation pipeline (tuner.validation); every
    problem printed and exit 2 if it has any."""
    try:
        try:
            text = file.read_text()
        except OSError as e:
            raise SpecError.one("(file)", e.strerror or str(e), str(file)) from None
        nodes = target_nodes(settings) if fit else None
    except SpecError as e:
        _print_issues(e, file)
        raise typer.Exit(2) from None
    checks = validation.Checks(
        allowed_modules=_allowed(settings, allow_module),
        nodes=nodes,
        build_env=build_env,
        max_trials=settings.max_trials,
        max_asha_rungs=settings.max_asha_rungs,
        plan=plan,
        tracking_uri=settings.tracking_uri,
    )
    checked = validation.check_source(text, file.suffix != ".json", checks)
    if not checked.ok:
        _print_issues(checked.error(), file)
        raise typer.Exit(2)
    return checked


@app.command()
def validate(
    file: Annotated[Path, typer.Argument(help="Spec file (YAML or JSON).")],
    env_check: Annotated[bool, typer.Option("--env/--no-env", help="Build the env once.")] = True,
    allow_module: AllowModule = None,
    fit: FitOpt = True,
) -> None:
    """Check a spec; print each problem with its field path and bad value."""
    checked = _checked(file, Settings(), allow_module, fit=fit, build_env=env_check)
    spec = checked.spec
    assert spec is not None
    for w in checked.warnings:
        err.print(f"[yellow]warning:[/yellow] {w}", highlight=False)
    typer.echo(f"{file}: ok ({spec.algorithm} on {spec.env}, {spec.search.method} search)")


@app.command()
def plan(
    file: Annotated[Path, typer.Argument(help="Spec file (YAML or JSON).")],
    output: Annotated[str, typer.Option(help="text or json.")] = "text",
    allow_module: AllowModule = None,
    fit: FitOpt = True,
) -> None:
    """What a spec will cost: trials, one trial's resources, how many run at once on the
    target cluster and what limits that, the most env steps, whether it fits."""
    checked = _checked(file, Settings(), allow_module, fit=fit, build_env=False, plan=True)
    result = checked.plan
    assert result is not None
    if output == "json":
        typer.echo(json.dumps(result.model_dump(mode="json"), indent=2))
    else:
        typer.echo(
            f"{file}: {result.trials} search trials"
            + (f" + {result.confirm_trials} confirmation trials" if result.confirm_trials else "")
            + f"; one trial takes {json.dumps(result.per_trial)}"
        )
        if result.concurrent is not None:
            typer.echo(f"{result.concurrent} at once (limited by {result.limited_by})")
        if result.max_env_steps:
            typer.echo(f"at most {result.max_env_steps:,} env steps in all")
        if result.max_iterations:
            typer.echo(f"at most {result.max_iterations:,} iterations in all")
        if result.scheduler.get("type", "fifo") != "fifo":
            typer.echo(f"scheduler: {scheduler_line(result.scheduler)}")
        else:
            typer.echo("scheduler: fifo (no early stopping)")
        if result.sampler:
            typer.echo(f"sampler: {sampler_line(result.sampler)}")
        if result.race:
            seeds = ", ".join(str(s) for s in result.race["seeds"])
            typer.echo(f"race: each config on up to seeds {seeds}; {result.race['rule']}")
        if result.base_settings:
            typer.echo(f"base settings: {json.dumps(result.base_settings)}")
        if result.warm_start:
            reused = result.warm_start
            typer.echo(
                f"warm start from {reused['from']}: first {json.dumps(reused['first'])}; "
                f"{reused['told_to_optuna']} earlier trials told to Optuna"
            )
        for w in result.warnings:
            err.print(f"[yellow]warning:[/yellow] {w}", highlight=False)
        for problem in result.problems:
            err.print(f"  {problem.loc}: {problem.msg}", markup=False, highlight=False)
        typer.echo("fits" if result.fits else "does NOT fit")
    raise typer.Exit(0 if result.fits else 2)


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
    allow_module: AllowModule = None,
) -> None:
    """Run a sweep in this process on a local Ray (no server) and print the best trial.

    For a cluster, run the service with TUNER_RAY_ADDRESS and use `tuner submit`."""
    if output not in ("table", "json"):
        err.print(f"--output: expected 'table' or 'json', got {output!r}")
        raise typer.Exit(2)
    settings = Settings(data_dir=data_dir) if data_dir else Settings()
    # validated before Ray starts: a bad spec costs seconds, not a cluster's start
    checked = _checked(file, settings, allow_module, fit=settings.cluster_fit_check)
    spec = checked.spec
    assert spec is not None
    from tuner.launcher import RayStartError, ensure_ray

    settings.data_path.mkdir(parents=True, exist_ok=True)
    # the local Ray starts while RLlib and torch import and MLflow's store opens on a
    # thread (seconds each); joined before anything else, a migration never cut short
    preparing = threading.Thread(
        target=_import_and_open, args=(settings.tracking_uri,), name="prepare", daemon=True
    )
    _Ending.after_ray = True
    preparing.start()
    try:
        ensure_ray()
    except RayStartError as e:
        preparing.join()  # a store's migration is never cut short
        err.print(str(e), highlight=False)
        raise typer.Exit(1) from None
    preparing.join()
    from tuner.sweep import GracefulCtrlC, StorageError, SweepOptions, run_sweep

    options = SweepOptions(
        storage_path=settings.tune_storage,
        resume=resume,
        space=checked.space,
        progress_to_stderr=output == "json",
        tracking=tracking_config(settings),
        check_fit=settings.cluster_fit_check,
        allowed_modules=_allowed(settings, allow_module),
        growth_nodes=settings.growth_nodes,
        max_asha_rungs=settings.max_asha_rungs,
        # Ctrl-C: running trials checkpoint first; Ctrl-C again stops at once
        callbacks=[GracefulCtrlC()],
    )
    try:
        summary = run_sweep(spec, options)
    except SpecError as e:
        _print_issues(e, file)
        raise typer.Exit(2) from None
    except StorageError as e:
        err.print(str(e), highlight=False)
        raise typer.Exit(2) from None
    except KeyboardInterrupt:  # a Ctrl-C after Tune had already begun to stop
        err.print("interrupted; `tuner run --resume` continues from the last saved state")
        raise typer.Exit(130) from None
    if output == "json":
        sys.stdout.write(json.dumps(summary.model_dump(mode="json"), indent=2) + "\n")
    else:
        _print_summary(summary)
    raise typer.Exit(outcome_code(summary.status))


def _import_and_open(tracking_uri: str) -> None:
    """`tuner run`'s thread beside the Ray start: the driver's modules (RLlib, torch,
    Tune, MLflow: tuner.sweep imports them), then MLflow's store."""
    import tuner.sweep  # noqa: F401 - seconds of imports, off the main thread
    from tuner.tracking import open_store

    open_store(tracking_uri)


def tracking_config(settings: Settings) -> TrackingConfig:
    """MLflow tracking as the settings say (embedded: SQLite + artifacts in the data dir)."""
    from tuner.tracking import TrackingConfig

    return TrackingConfig(
        tracking_uri=settings.tracking_uri,
        artifact_location=None if settings.mlflow_tracking_uri else settings.artifact_root,
        ui_url=settings.mlflow_ui_url,
    )


def _print_summary(summary: SweepSummary) -> None:
    out = out_console()
    for w in summary.warnings:
        out.print(f"[yellow]warning:[/yellow] {w}", highlight=False)
    errored = [t for t in summary.trials if t.status == TrialStatus.ERROR]
    out.print(
        f"\n[bold]{summary.name}[/bold]: {summary.status}, {len(summary.trials)} trials"
        f" ({len(errored)} errored)"
    )
    for t in errored:
        out.print(
            f"  [red]{t.trial_id}[/red]: {t.error.splitlines()[0] if t.error else ''}",
            highlight=False,
        )
    b = summary.best
    trial = next((t for t in summary.trials if b and t.trial_id == b.trial_id), None)
    peak_last = ""
    if trial is not None and trial.best_metric is not None and trial.metric is not None:
        peak_last = f", peak {trial.best_metric:.4g}, last {trial.metric:.4g}"
    best = b.model_dump(mode="json") if b else None
    for line in answer_lines(best, summary.metric, peak_last):
        out.print(line, markup=False, highlight=False)
    print_pareto(
        out,
        [m.model_dump(mode="json") for m in summary.pareto],
        summary.best.scope if summary.best else "",
    )
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
    checkpoint: Annotated[
        str,
        typer.Argument(
            help="Checkpoint dir, runs:/ URI, models:/NAME/VERSION (or /latest, or "
            "@ALIAS), or a Tune storage URI (s3://...)."
        ),
    ],
    episodes: Annotated[int, typer.Option(min=1, help="Deterministic episodes.")] = 10,
    seed: Annotated[
        int | None,
        typer.Option(
            min=0,
            help="Episode i starts from seed + i (default: the seed of the trial that saved "
            "the checkpoint, as its final evaluation played them).",
        ),
    ] = None,
    render_to: Annotated[
        Path | None, typer.Option(help="Save the first episode as a GIF in this folder.")
    ] = None,
    output: Annotated[str, typer.Option(help="text or json.")] = "text",
    data_dir: Annotated[
        Path | None,
        typer.Option(help="Where `tuner run --data-dir` kept its data (default TUNER_DATA_DIR)."),
    ] = None,
) -> None:
    """Restore a checkpoint's policy and report its mean return over N episodes."""
    from gymnasium import error as gym_error

    from tuner.rllib import NoTrackingStore, evaluate_checkpoint

    settings = Settings(data_dir=data_dir) if data_dir else Settings()
    try:
        result = evaluate_checkpoint(
            checkpoint,
            episodes=episodes,
            tracking_uri=settings.tracking_uri,
            render_to=render_to,
            seed=seed,
        )
    except NoTrackingStore as e:
        # reading never creates a store: most likely the data dir is not the one the
        # sweep used, so say which settings choose it
        err.print(
            f"checkpoint {checkpoint!r}: {e}; point TUNER_DATA_DIR (or --data-dir) at the "
            "data dir `tuner run` used, or TUNER_MLFLOW_TRACKING_URI at the MLflow store "
            "that holds it",
            markup=False,
            highlight=False,
        )
        raise typer.Exit(2) from None
    except (FileNotFoundError, OSError, ValueError, gym_error.Error) as e:
        err.print(f"checkpoint {checkpoint!r}: {e}", markup=False, highlight=False)
        raise typer.Exit(2) from None
    if output == "json":
        typer.echo(json.dumps(result.model_dump(mode="json"), indent=2))
    else:
        typer.echo(
            f"{result.env}: mean return {result.mean_return:.4g} ± {result.std_return:.3g} "
            f"over {result.episodes} episodes from seed {result.seed}"
            + (" (summed over agents)" if result.agent_returns else "")
        )
        for agent, returns in result.agent_returns.items():
            typer.echo(f"  agent {agent}: mean return {sum(returns) / len(returns):.4g}")


LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def serve_settings(settings: Settings, host: str, port: int, ui_port: int | None) -> Settings:
    """The settings `tuner serve` runs with: its bind address (the Host check's), and,
    where it starts the MLflow UI (`ui_port`) and TUNER_MLFLOW_UI_URL is not set, that
    UI's address for every MLflow link (the page, the API, the drivers' summaries)."""
    update: dict[str, object] = {"host": host, "port": port}
    if ui_port is not None and "mlflow_ui_url" not in settings.model_fields_set:
        update["mlflow_ui_url"] = f"http://127.0.0.1:{ui_port}"  # where the UI binds
    return settings.model_copy(update=update)


def _bind_error(host: str, port: int) -> str | None:
    """Why `port` on `host` cannot be bound now (None: it can), tried as the servers bind
    it: SO_REUSEADDR, so a port left in TIME_WAIT by a server just stopped counts as free
    (uvicorn would take it), one another process listens on does not."""
    import socket

    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except socket.gaierror as e:
        return f"cannot resolve {host}: {e.strerror}"
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                return "in use by another process"
            return f"not available ({e.strerror or e})"
    return None


def _next_free(host: str, port: int, avoid: int | None) -> int | None:
    """A free port just above `port` to suggest (None when the next 20 are all taken)."""
    for candidate in range(port + 1, min(port + 21, 65536)):
        if candidate != avoid and _bind_error(host, candidate) is None:
            return candidate
    return None


def _port_problems(host: str, port: int, ui_port: int | None) -> list[str]:
    """What stops `tuner serve` from binding its ports, each naming the port, what it is
    for and the option and setting that pick another; checked before anything starts,
    else a busy port shows only after the Ray head and the MLflow UI have started, as
    uvicorn's bare "[Errno 98] address already in use"."""
    wanted = [(host, port, ui_port, "the API", "--port", "TUNER_PORT")]
    if ui_port is not None:  # the MLflow UI binds loopback (tuner.launcher's start_mlflow_ui)
        ui = ("127.0.0.1", ui_port, port, "the MLflow UI", "--mlflow-port", "TUNER_MLFLOW_PORT")
        wanted.append(ui)
    if ui_port == port:
        return [
            f"the API and the MLflow UI cannot share port {port}: pick another for the UI "
            f"with --mlflow-port or TUNER_MLFLOW_PORT (e.g. `TUNER_MLFLOW_PORT={port + 1} "
            "make run`)"
        ]
    problems = []
    for where, number, taken, what, option, variable in wanted:
        why = _bind_error(where, number)
        if why is None:
            continue
        other = _next_free(where, number, avoid=taken)
        example = (
            f" (e.g. `{option} {other}`, or `{variable}={other} make run`; {other} is free)"
            if other
            else ""
        )
        problems.append(
            f"port {number} on {where} ({what}) is {why}: pick another with {option} or "
            f"{variable}{example}"
        )
    return problems


@app.command()
def serve(
    host: Annotated[str | None, typer.Option(help="Bind address (TUNER_HOST).")] = None,
    port: Annotated[int | None, typer.Option(help="Port (TUNER_PORT).")] = None,
    mlflow_ui: Annotated[
        bool, typer.Option(help="Also serve the MLflow UI (embedded store only).")
    ] = False,
    mlflow_port: Annotated[
        int,
        typer.Option(envvar="TUNER_MLFLOW_PORT", help="Port of the MLflow UI (TUNER_MLFLOW_PORT)."),
    ] = 5000,
) -> None:
    """Start the API and web page (and, with no TUNER_RAY_ADDRESS, a local Ray head)."""
    settings = Settings()
    host = host or settings.host
    port = port or settings.port
    if host not in LOOPBACK and not settings.api_token:
        err.print(f"refusing to bind {host}: set TUNER_API_TOKEN to serve beyond loopback")
        raise typer.Exit(2)
    # a configured tracking server serves its own UI: none is started (start_mlflow_ui)
    ui_port = mlflow_port if mlflow_ui and not settings.mlflow_tracking_uri else None
    problems = _port_problems(host, port, ui_port)
    for problem in problems:
        err.print(problem, markup=False, highlight=False)
    if problems:
        raise typer.Exit(2)
    import uvicorn

    from tuner.api import create_app

    settings = serve_settings(settings, host, port, mlflow_port if mlflow_ui else None)
    settings.data_path.mkdir(parents=True, exist_ok=True)
    # The app starts the MLflow UI in its lifespan and stops it there: uvicorn re-raises
    # SIGTERM after shutdown, so code after uvicorn.run would never run.
    app_ = create_app(settings, mlflow_ui_port=mlflow_port if mlflow_ui else None)
    uvicorn.run(app_, host=host, port=port, log_level="info")
