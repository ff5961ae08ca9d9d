"""Commands that talk to a running service over HTTP: submit, status, stop, resume,
delete; and the spec's JSON schema."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from tuner.mlflow_names import STAGE_CONFIRM, STAGE_SEARCH
from tuner.settings import Settings
from tuner.statuses import TERMINAL, TRIAL_ENDED

if TYPE_CHECKING:
    import httpx


from tuner.cli._answer import answer_lines
from tuner.cli._app import app, err, out_console, outcome_code, print_pareto, print_table


def _client(url: str | None) -> httpx.Client:
    import httpx

    settings = Settings()
    base = url or os.environ.get("TUNER_URL") or f"http://{settings.host}:{settings.port}"
    headers = {"Authorization": f"Bearer {settings.api_token}"} if settings.api_token else {}
    return httpx.Client(base_url=base.rstrip("/") + "/api/v1", headers=headers, timeout=30)


def _has_request(error: Exception) -> bool:
    try:
        return error.request is not None  # type: ignore[attr-defined]
    except RuntimeError:  # httpx raises when the error has no request
        return False


def _detail(response: httpx.Response) -> object:
    """An error response's `detail`; its text where the body is not our JSON (a proxy's
    page, a server that failed before answering)."""
    try:
        body = response.json()
    except ValueError:
        return response.text.strip()[:500] or response.reason_phrase
    return body.get("detail", body) if isinstance(body, dict) else body


def _call(method: str, url: str | None, path: str, **kwargs: object) -> dict:
    import httpx

    try:
        with _client(url) as client:
            response = client.request(method, path, **kwargs)
    except httpx.HTTPError as e:
        where = str(e.request.url) if _has_request(e) else path
        err.print(
            f"cannot reach the tuner server at {where}: {e} (--url or TUNER_URL; "
            "`tuner serve` starts one)",
            markup=False,
            highlight=False,
        )
        raise typer.Exit(3) from None
    if response.status_code >= 400:
        detail = _detail(response)
        if isinstance(detail, list):
            for issue in detail:
                err.print(
                    f"  {issue.get('loc')}: {issue.get('msg')} (got "
                    f"{json.dumps(issue.get('value'), default=str)})",
                    highlight=False,
                )
        else:
            err.print(f"{response.status_code}: {detail}", highlight=False)
        raise typer.Exit(2 if response.status_code in (400, 404, 409, 413, 422) else 1)
    return response.json() if response.content else {}


UrlOpt = Annotated[str | None, typer.Option("--url", help="Server URL (TUNER_URL).")]


@app.command()
def submit(
    file: Annotated[Path, typer.Argument(help="Spec file (YAML or JSON).")],
    wait: Annotated[bool, typer.Option(help="Follow the sweep until it ends.")] = False,
    url: UrlOpt = None,
) -> None:
    """Submit a sweep to a running server; prints its id."""
    ctype = "application/json" if file.suffix == ".json" else "application/yaml"
    try:
        body = file.read_bytes()
    except OSError as e:
        err.print(f"{file}: {e.strerror}")
        raise typer.Exit(2) from None
    # as long as the server validates it (its validator's deadline is 120 s, and a worker
    # just started loads RLlib first): given up sooner, the sweep may start unseen
    exp = _call(
        "POST",
        url,
        "/experiments",
        content=body,
        headers={"Content-Type": ctype},
        timeout=150,
    )
    for w in exp.get("warnings", []):
        err.print(f"[yellow]warning:[/yellow] {w}", highlight=False)
    typer.echo(exp["id"])
    if wait:
        try:
            exp = _wait(url, exp["id"])
        except KeyboardInterrupt:
            err.print(f"stopped following; the sweep runs on (`tuner stop {exp['id']}` stops it)")
            raise typer.Exit(130) from None
        out = out_console()
        out.print(f"{exp['id']}: {exp['status']}", markup=False, highlight=False)
        print_answer(out, exp)
        raise typer.Exit(outcome_code(exp["status"]))


def headline(best: dict[str, Any]) -> str:
    """The answer's number in a list of sweeps: its confirmed mean where a confirmation
    decided it, else its score; `-` without one."""
    confirmed = best.get("confirmed") or {}
    if best.get("source") == STAGE_CONFIRM and confirmed.get("mean") is not None:
        return f"{confirmed['mean']:.4g} (confirmed mean)"
    return f"{best['metric_value']:.4g} (score)" if best else "-"


def print_answer(out: Any, exp: dict[str, Any]) -> None:
    """A sweep's answer (tuner.cli answer_lines) and its MLflow run link."""
    for line in answer_lines(exp.get("best"), exp["metric"]):
        out.print(line, markup=False, highlight=False)
    mlflow = exp.get("mlflow") or {}
    if mlflow.get("url"):
        out.print(f"mlflow: {mlflow['url']}", markup=False, highlight=False)


def _wait(url: str | None, experiment_id: str, poll_s: float = 2) -> dict:
    """Follows a sweep until it ends. On a terminal, a live bar of its trials (the name
    printed once above it, so a long name never squeezes the counts out of the line);
    piped, one plain line when it ends."""
    import time

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
    from rich.table import Column

    def poll() -> tuple[dict, int, int, str]:
        exp = _call("GET", url, f"/experiments/{experiment_id}")
        counts = exp.get("trial_counts", {})
        done = sum(counts.get(s, 0) for s in TRIAL_ENDED)
        total = max(sum(counts.values()), exp["spec"]["search"]["num_samples"])
        best = exp.get("best") or {}
        confirmed = best.get("confirmed") or {}
        if best.get("source") == STAGE_CONFIRM and confirmed.get("mean") is not None:
            # the answer: its mean over fresh seeds, as the lines printed below it say
            return exp, done, total, f"confirmed mean {confirmed['mean']:.4g}"
        trials = _call("GET", url, f"/experiments/{experiment_id}/trials")["items"]
        # the search's best score so far (what trials are ranked by: TrialView.score), as
        # status and the page; a confirmation trial's score is one seed's, not a best
        scores = [
            t["score"]
            for t in trials
            if t.get("score") is not None and t.get("stage", STAGE_SEARCH) == STAGE_SEARCH
        ]
        top = (max(scores) if exp["mode"] == "max" else min(scores)) if scores else None
        return exp, done, total, f"score {top:.4g}" if top is not None else ""

    if not err.is_terminal:
        while True:
            exp, done, total, best = poll()
            if exp["status"] in TERMINAL:
                line = f"{exp['name']} ({experiment_id}): {exp['status']}, {done}/{total} trials"
                line += f", {best}" if best else ""
                err.print(line, markup=False, highlight=False, soft_wrap=True)
                return exp
            time.sleep(poll_s)
    whole = Column(no_wrap=True)  # the counts and the score are never cut
    with Progress(
        TextColumn("{task.description}", table_column=whole),
        BarColumn(bar_width=None, table_column=Column(ratio=1)),  # the bar gives way
        MofNCompleteColumn(table_column=whole),
        TextColumn("{task.fields[best]}", table_column=whole),
        console=err,
        expand=True,
    ) as bar:
        task = bar.add_task("", total=None, best="")
        named = False
        while True:
            exp, done, total, best = poll()
            if not named:
                name = f"{exp['name']} ({experiment_id})"
                bar.console.print(name, markup=False, highlight=False, soft_wrap=True)
                named = True
            bar.update(task, completed=done, total=total, description=exp["status"], best=best)
            if exp["status"] in TERMINAL:
                return exp
            time.sleep(poll_s)


@app.command()
def status(
    experiment_id: Annotated[str | None, typer.Argument(help="Sweep id; none lists all.")] = None,
    url: UrlOpt = None,
    output: Annotated[str, typer.Option(help="table or json.")] = "table",
) -> None:
    """Show one sweep (with its trials) or list sweeps."""
    out = out_console()
    if experiment_id is None:
        data = _call("GET", url, "/experiments", params={"limit": 200})
        if output == "json":
            typer.echo(json.dumps(data, indent=2))
            return
        rows = []
        for e in data["items"]:
            best = e.get("best") or {}
            rows.append(
                [
                    e["id"],
                    e["name"],
                    e["status"],
                    e["algorithm"],
                    str(sum(e["trial_counts"].values())),
                    headline(best),
                ]
            )
        print_table(out, ["id", "name", "status", "algorithm", "trials", "best"], rows)
        return
    exp = _call("GET", url, f"/experiments/{experiment_id}")
    trials = _call("GET", url, f"/experiments/{experiment_id}/trials")["items"]
    if output == "json":
        typer.echo(json.dumps({**exp, "trials": trials}, indent=2))
        return
    out.print(f"{exp['name']} ({exp['id']}): {exp['status']}", markup=False, highlight=False)
    if exp.get("error"):  # its text may hold brackets: never read as markup
        out.print(exp["error"], style="red", markup=False, highlight=False)
    for w in exp.get("warnings") or []:
        out.print(f"warning: {w}", markup=False, highlight=False)

    def num(value: float | None) -> str:
        return "-" if value is None else f"{value:.4g}"

    headers = ["trial", "status", "iter", "env steps", "score", "peak", "last", "retries"]
    rows = [
        [
            t["trial_id"],
            t["status"],
            str(t["iterations"]),
            str(t["env_steps"]),
            num(t.get("score")),
            num(t.get("best_metric")),
            num(t.get("metric")),
            str(t.get("retries", 0)),
        ]
        for t in trials
    ]
    print_table(out, headers, rows, configs=[t["config"] for t in trials])
    print_answer(out, exp)
    print_pareto(out, exp.get("pareto") or [], exp.get("spec", {}).get("scope", ""))


@app.command()
def stop(experiment_id: str, url: UrlOpt = None) -> None:
    """Stop a sweep gracefully (trials checkpoint and end)."""
    exp = _call("POST", url, f"/experiments/{experiment_id}/stop")
    typer.echo(f"{experiment_id}: {exp['status']}")


@app.command()
def resume(experiment_id: str, url: UrlOpt = None) -> None:
    """Continue a PARTIAL, STOPPED or FAILED sweep (same MLflow parent run, trials from their
    checkpoints)."""
    exp = _call("POST", url, f"/experiments/{experiment_id}/resume")
    typer.echo(f"{experiment_id}: {exp['status']}")


@app.command()
def delete(
    experiment_id: str,
    purge: Annotated[
        bool,
        typer.Option("--purge", help="Also delete its Tune files (checkpoints) and MLflow runs."),
    ] = False,
    url: UrlOpt = None,
) -> None:
    """Remove a finished sweep from the service."""
    # a purge of a big run directory (or one on an object store) takes a while
    _call("DELETE", url, f"/experiments/{experiment_id}", params={"purge": purge}, timeout=660)
    typer.echo(f"{experiment_id}: deleted" + (" and purged" if purge else ""))


@app.command("schema")
def schema() -> None:
    """Print the spec's JSON Schema."""
    from tuner.spec import json_schema

    typer.echo(json.dumps(json_schema(), indent=2))


@app.command()
def compare(
    # 4: tuner.compare.MOST (a test holds them equal; imported here it would load the store)
    experiment_ids: Annotated[list[str], typer.Argument(help="2 to 4 sweep ids, space-separated.")],
    url: UrlOpt = None,
    output: Annotated[str, typer.Option(help="table or json.")] = "table",
) -> None:
    """Sweeps side by side: best configs (differing keys marked *), confirmed mean and
    CI, score, MLflow links."""
    from tuner.compare import MOST

    # checked here, not left to the API: its message names its own comma-separated form
    if not 2 <= len(experiment_ids) <= MOST:
        err.print(
            f"give 2 to {MOST} sweep ids, space-separated (got {len(experiment_ids)})",
            markup=False,
            highlight=False,
        )
        raise typer.Exit(2)
    repeated = sorted({i for i in experiment_ids if experiment_ids.count(i) > 1})
    if repeated:
        err.print(
            f"give 2 to {MOST} distinct sweep ids, space-separated ({', '.join(repeated)} "
            "given more than once)",
            markup=False,
            highlight=False,
        )
        raise typer.Exit(2)
    data = _call("GET", url, "/compare", params={"ids": ",".join(experiment_ids)})
    if output == "json":
        typer.echo(json.dumps(data, indent=2))
        return
    out = out_console()
    sweeps, differing = data["sweeps"], set(data["differing_keys"])

    def score(s: dict) -> str:
        return "-" if not s["best"] else f"{s['best']['metric_value']:.4g} ({s['scope']})"

    def confirmed(s: dict) -> str:
        c = s.get("confirmed") or {}
        if c.get("mean") is None:
            return "-"
        ci = c.get("ci95") or [None, None]
        return (
            f"{c['mean']:.4g} [{ci[0]:.4g}, {ci[1]:.4g}]"
            if ci[0] is not None
            else f"{c['mean']:.4g}"
        )

    rows = [
        ["name (id)", *[f"{s['name']} ({s['id']})" for s in sweeps]],
        ["status", *[s["status"] for s in sweeps]],
        ["score", *[score(s) for s in sweeps]],
        ["confirmed mean [95 % CI]", *[confirmed(s) for s in sweeps]],
    ]
    configs = [(s["best"] or {}).get("config", {}) for s in sweeps]
    for key in data["keys"]:
        values = [json.dumps(c[key]) if key in c else "-" for c in configs]  # "-": missing
        rows.append([f"{key} *" if key in differing else key, *values])
    rows.append(["mlflow run", *[(s.get("mlflow") or {}).get("url") or "-" for s in sweeps]])
    print_table(out, rows[0], rows[1:])
