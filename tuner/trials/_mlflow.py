"""MLflow tracking of a sweep: one parent run per sweep, one nested child run per trial.

Ray's MLflowLoggerCallback logs hundreds of config keys as params and config
numbers as metrics on every iteration, makes flat runs and uploads no
checkpoints. This callback logs curated params and metrics in batches, nests
trial runs under the sweep's run, and uploads the checkpoints a trial keeps.

It talks to MLflow only through an `MlflowClient` bound to its own tracking
URI: the process-global `mlflow.set_tracking_uri` of a host process is never
touched. Runs are found again by tags (`tuner.run`, `tuner.trial_id`), so a
resumed sweep continues the same parent run and never duplicates a child.
"""

from __future__ import annotations

import csv
import io
import json
import math
import tempfile
import time
from pathlib import Path
from typing import Any

from mlflow.entities import Metric, Param, RunTag
from mlflow.tracking import MlflowClient
from ray.tune import Callback

from tuner.spec import ExperimentSpec
from tuner.trials._algorithms import fixed_settings, trial_index, trial_seed
from tuner.trials._stoppers import lookup
from tuner.trials._summary import SweepSummary

# MLflow's per-request limits for log_batch.
MAX_PARAMS, MAX_METRICS, MAX_TAGS = 100, 1000, 100
MAX_PARAM_CHARS = 6000
TAG_RUN, TAG_TRIAL, TAG_PARENT = "tuner.run", "tuner.trial_id", "mlflow.parentRunId"
# Curated per-iteration metrics (flattened RLlib result keys).
RESULT_METRICS = (
    "env_runners/episode_return_mean",
    "env_runners/episode_return_max",
    "env_runners/episode_return_min",
    "env_runners/episode_len_mean",
    "num_env_steps_sampled_lifetime",
    "training_iteration",
    "time_this_iter_s",
    "time_total_s",
    "evaluation/env_runners/episode_return_mean",
)
LEARNER_WORDS = ("loss", "entropy", "mean_kl", "qf_mean", "alpha_value")


def _flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in d.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flatten(value, name + "/"))
        else:
            out[name] = value
    return out


def _param_value(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text[:MAX_PARAM_CHARS]


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        try:
            value = float(value)  # numpy scalars
        except (TypeError, ValueError):
            return None
    value = float(value)
    return value if math.isfinite(value) else None


def result_metrics(result: dict[str, Any], extra_keys: tuple[str, ...] = ()) -> dict[str, float]:
    """The curated metrics of one Tune result: returns, lengths, steps, time, losses."""
    out: dict[str, float] = {}
    for key in (*RESULT_METRICS, *extra_keys):
        value = _number(lookup(result, key))
        if value is not None:
            out[key] = value
    for module_id, stats in (result.get("learners") or {}).items():
        if module_id == "__all_modules__" or not isinstance(stats, dict):
            continue
        for key, value in stats.items():
            number = _number(value)
            if number is not None and any(w in key for w in LEARNER_WORDS):
                out[f"learners/{module_id}/{key}"] = number
    return out


def _chunks(items: list, size: int) -> list[list]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def tracking_tags(spec: ExperimentSpec) -> dict[str, str]:
    """Tags of a sweep's parent run: what ran, and with which versions."""
    import gymnasium
    import ray

    import tuner

    return {
        "tuner.algorithm": spec.algorithm,
        "tuner.env": spec.env,
        "tuner.search_method": spec.search.method,
        "tuner.scheduler": spec.scheduler.type,
        "tuner.metric": spec.metric,
        "tuner.version": tuner.__version__,
        "ray.version": ray.__version__,
        "rllib.version": ray.__version__,
        "gymnasium.version": gymnasium.__version__,
    }


class MLflowTracker(Callback):
    """Tune callback: parent run per sweep, child run per trial, checkpoints as artifacts.

    Only plain data as attributes (Tune pickles callbacks into its state); the
    client is made lazily and left out of the pickle.
    """

    def __init__(
        self,
        spec: ExperimentSpec,
        *,
        tracking_uri: str,
        run_name: str,
        space_keys: list[str],
        experiment_name: str | None = None,
        artifact_location: str | None = None,
    ) -> None:
        self.spec_json = spec.model_dump(mode="json")
        self.spec_yaml = spec.to_yaml()
        self.tracking_uri = tracking_uri
        self.run_name = run_name
        self.space_keys = list(space_keys)
        self.experiment_name = experiment_name or spec.name
        self.artifact_location = artifact_location
        self.metric = spec.metric
        self.experiment_id: str | None = None
        self.parent_run_id: str | None = None
        self.child_runs: dict[str, str] = {}
        self.last_logged: dict[str, int] = {}
        self.tagged_nodes: set[str] = set()
        self.finalized: set[str] = set()
        self._client: MlflowClient | None = None
        self._writer: _BackgroundWriter | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_client"] = None
        state["_writer"] = None
        return state

    @property
    def spec(self) -> ExperimentSpec:
        """The sweep's spec."""
        return ExperimentSpec.model_validate(self.spec_json)

    @property
    def client(self) -> MlflowClient:
        """An MlflowClient bound to this tracker's URI (never the global one)."""
        if self._client is None:
            self._client = MlflowClient(tracking_uri=self.tracking_uri)
        return self._client

    # -- the parent run -------------------------------------------------------------

    def start(self) -> str:
        """Finds or creates the experiment and the sweep's parent run; returns its id."""
        if self.parent_run_id:
            return self.parent_run_id
        exp = self.client.get_experiment_by_name(self.experiment_name)
        if exp is None:
            location = (
                f"{self.artifact_location.rstrip('/')}/{self.experiment_name}"
                if self.artifact_location
                else None
            )
            self.experiment_id = self.client.create_experiment(
                self.experiment_name, artifact_location=location
            )
        else:
            self.experiment_id = exp.experiment_id
        found = self.client.search_runs(
            [self.experiment_id],
            filter_string=f"tags.`{TAG_RUN}` = '{self.run_name}' and tags.`tuner.kind` = 'sweep'",
            max_results=1,
        )
        if found:
            self.parent_run_id = found[0].info.run_id
            self.client.update_run(self.parent_run_id, status="RUNNING")
            return self.parent_run_id
        tags = {TAG_RUN: self.run_name, "tuner.kind": "sweep", **tracking_tags(self.spec)}
        run = self.client.create_run(self.experiment_id, run_name=self.run_name, tags=tags)
        self.parent_run_id = run.info.run_id
        spec = self.spec
        params = {
            "algorithm": spec.algorithm,
            "env": spec.env,
            "search.method": spec.search.method,
            "search.num_samples": spec.search.num_samples,
            "scheduler": spec.scheduler.type,
            "metric": spec.metric,
            "mode": spec.mode,
            "seed": spec.seed,
        }
        self._log(self.parent_run_id, params=params)
        self.client.log_text(self.parent_run_id, self.spec_yaml, "spec.yaml")
        return self.parent_run_id

    def setup(self, **info: Any) -> None:
        self.start()

    # -- child runs -----------------------------------------------------------------

    def _child_run(self, trial: Any) -> str:
        trial_id = trial.trial_id
        if trial_id in self.child_runs:
            return self.child_runs[trial_id]
        parent = self.start()
        found = self.client.search_runs(
            [self.experiment_id],
            filter_string=f"tags.`{TAG_TRIAL}` = '{trial_id}' and tags.`{TAG_PARENT}` = '{parent}'",
            max_results=1,
        )
        if found:
            run_id = found[0].info.run_id
            self.client.update_run(run_id, status="RUNNING")
            history = self.client.get_metric_history(run_id, "training_iteration")
            self.last_logged[trial_id] = int(max((m.value for m in history), default=0))
        else:
            run_id = self._create_child(trial, parent)
        self.child_runs[trial_id] = run_id
        return run_id

    def _create_child(self, trial: Any, parent: str) -> str:
        from tuner.trials._tuner import sampled_values

        spec = self.spec
        sampled = sampled_values(trial.config, self.space_keys)
        short = ",".join(f"{k.split('.')[-1]}={_short(v)}" for k, v in sampled.items())
        name = f"{trial.trial_id} {short}"[:250]
        tags = {
            TAG_PARENT: parent,
            TAG_TRIAL: trial.trial_id,
            TAG_RUN: self.run_name,
            "tuner.kind": "trial",
        }
        run = self.client.create_run(self.experiment_id, run_name=name, tags=tags)
        params: dict[str, Any] = {
            "algorithm": spec.algorithm,
            "env": spec.env,
            "seed": trial_seed(spec.seed, trial_index(trial.trial_id)),
        }
        params.update({f"fixed.{k}": v for k, v in _flatten(fixed_settings(spec)).items()})
        params.update(sampled)
        self._log(run.info.run_id, params=params)
        config = {k: v for k, v in trial.config.items() if not k.startswith("__")}
        self.client.log_text(
            run.info.run_id, json.dumps(config, indent=1, default=str), "rllib_config.json"
        )
        return run.info.run_id

    def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._child_run(trial)

    def on_trial_result(
        self, iteration: int, trials: list, trial: Any, result: dict, **info: Any
    ) -> None:
        run_id = self._child_run(trial)
        it = int(result.get("training_iteration") or 0)
        if it <= self.last_logged.get(trial.trial_id, 0):
            return  # re-run after a restore from an older checkpoint: already logged
        self.last_logged[trial.trial_id] = it
        step = int(result.get("num_env_steps_sampled_lifetime") or it)
        now = int(time.time() * 1000)
        metrics = result_metrics(result, (self.metric,))
        batch = [Metric(k, v, now, step) for k, v in metrics.items()]
        # Off Tune's loop: the next iteration is scheduled only after this callback returns.
        self.writer.submit(lambda: self._log(run_id, metrics=batch))
        if trial.trial_id not in self.tagged_nodes:
            info_ = result.get("tuner") or {}
            tags = {
                "tuner.node_ip": result.get("node_ip"),
                "tuner.node_id": info_.get("node_id"),
                "tuner.device": info_.get("device"),
            }
            self._log(run_id, tags={k: str(v) for k, v in tags.items() if v})
            self.tagged_nodes.add(trial.trial_id)

    @property
    def writer(self) -> _BackgroundWriter:
        """The thread that logs per-iteration metrics (made lazily, never pickled)."""
        if self._writer is None:
            self._writer = _BackgroundWriter()
        return self._writer

    def flush(self) -> None:
        """Waits until every queued metric batch is in MLflow."""
        if self._writer is not None:
            self._writer.flush()

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self.flush()
        run_id = self._child_run(trial)
        self._log_checkpoints(run_id, trial)
        self.client.set_terminated(run_id, status="FINISHED")
        self.finalized.add(trial.trial_id)

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self.flush()
        run_id = self._child_run(trial)
        text = "unknown error"
        if trial.error_file and Path(trial.error_file).exists():
            text = Path(trial.error_file).read_text()
        self.client.log_text(run_id, text, "error.txt")
        self._log(
            run_id,
            tags={"tuner.error": text.strip().splitlines()[-1][:5000] if text.strip() else "error"},
        )
        self._log_checkpoints(run_id, trial)
        self.client.set_terminated(run_id, status="FAILED")
        self.finalized.add(trial.trial_id)

    def on_experiment_end(self, trials: list, **info: Any) -> None:
        self.flush()
        for trial in trials:
            if trial.trial_id not in self.child_runs or trial.trial_id in self.finalized:
                continue
            if trial.status == "TERMINATED":  # ended by the sweep (stop_on_target, budget):
                self.on_trial_complete(0, trials, trial)  # Tune calls no on_trial_complete
            elif trial.status == "ERROR":
                self.on_trial_error(0, trials, trial)
            else:  # an interrupt left it unfinished: KILLED until a resume reopens it
                self.client.set_terminated(self.child_runs[trial.trial_id], status="KILLED")

    def _log_checkpoints(self, run_id: str, trial: Any) -> None:
        """Uploads the checkpoints Tune kept for this trial (num_to_keep of them)."""
        import pyarrow.fs as pafs

        fs, base = trial.storage.storage_filesystem, trial.path
        if not base:
            return
        infos = fs.get_file_info(pafs.FileSelector(base, allow_not_found=True))
        for info in sorted(infos, key=lambda i: i.path):
            name = info.base_name
            if info.type != pafs.FileType.Directory or not name.startswith("checkpoint_"):
                continue
            if isinstance(fs, pafs.LocalFileSystem):
                self.client.log_artifacts(run_id, info.path, f"checkpoints/{name}")
                continue
            with tempfile.TemporaryDirectory() as tmp:  # object-store storage: stage locally
                pafs.copy_files(info.path, tmp, source_filesystem=fs)
                self.client.log_artifacts(run_id, tmp, f"checkpoints/{name}")

    # -- the sweep's result -----------------------------------------------------------

    def finish(self, summary: SweepSummary) -> dict[str, Any]:
        """Logs the sweep's result on the parent run and registers the best checkpoint.

        Returns {experiment_id, parent_run_id, best_run_id, model_version}."""
        self.flush()
        parent = self.start()
        for view in summary.trials:
            view.mlflow_run_id = self.child_runs.get(view.trial_id) or self._find_child(
                view.trial_id
            )
        out: dict[str, Any] = {
            "experiment_id": self.experiment_id,
            "parent_run_id": parent,
            "best_run_id": None,
            "model_version": None,
        }
        best = summary.best
        if best is not None:
            best_run = next(
                (t.mlflow_run_id for t in summary.trials if t.trial_id == best.trial_id), None
            )
            out["best_run_id"] = best_run
            params = {f"best.{k}": v for k, v in best.config.items()}
            params.update({"best.trial_id": best.trial_id, "best.seed": best.seed})
            # MLflow params are write-once: a sweep interrupted and resumed reports its best
            # again. Params already there with another value go in as tags instead.
            logged = self.client.get_run(parent).data.params
            moved = {
                k: v for k, v in params.items() if k in logged and logged[k] != _param_value(v)
            }
            params = {k: v for k, v in params.items() if k not in logged}
            self._log(
                parent,
                params=params,
                metrics=[
                    Metric(f"best.{self.metric}", best.metric_value, int(time.time() * 1000), 0)
                ],
                tags={
                    "tuner.best_trial_id": best.trial_id,
                    "tuner.best_run_id": best_run or "",
                    **{f"tuner.{k}": _param_value(v) for k, v in moved.items()},
                },
            )
            self.client.log_text(
                parent, json.dumps(best.model_dump(mode="json"), indent=2), "best_config.json"
            )
            if best_run and best.checkpoint:
                out["model_version"] = self._register(best_run, Path(best.checkpoint).name)
        self._log_trials_table(parent, summary)
        self._log_learning_curves(parent, summary)
        status = {"SUCCEEDED": "FINISHED", "STOPPED": "KILLED"}.get(summary.status, "FAILED")
        self.client.set_terminated(parent, status=status)
        return out

    def _find_child(self, trial_id: str) -> str | None:
        found = self.client.search_runs(
            [self.experiment_id],
            filter_string=f"tags.`{TAG_TRIAL}` = '{trial_id}' and "
            f"tags.`{TAG_PARENT}` = '{self.parent_run_id}'",
            max_results=1,
        )
        return found[0].info.run_id if found else None

    def _register(self, run_id: str, checkpoint_name: str) -> str | None:
        """Registers runs:/<best run>/checkpoints/<name> as a version of '<experiment>-best'."""
        name = f"{self.experiment_name}-best"
        try:
            self.client.get_registered_model(name)
        except Exception:  # noqa: BLE001 - MlflowException RESOURCE_DOES_NOT_EXIST
            self.client.create_registered_model(
                name, description=f"Best checkpoints of tuner sweeps named {self.experiment_name}"
            )
        version = self.client.create_model_version(
            name,
            source=f"runs:/{run_id}/checkpoints/{checkpoint_name}",
            run_id=run_id,
            tags={TAG_RUN: self.run_name},
        )
        return f"models:/{name}/{version.version}"

    def _log_trials_table(self, parent: str, summary: SweepSummary) -> None:
        rows = [t.model_dump(mode="json") for t in summary.trials]
        self.client.log_text(parent, json.dumps(rows, indent=1), "trials.json")
        keys = sorted({k for t in summary.trials for k in t.config})
        buf = io.StringIO()
        writer = csv.writer(buf)
        cols = ["trial_id", "status", "seed", "iterations", "env_steps", "metric", "best_metric"]
        writer.writerow(cols + keys + ["mlflow_run_id", "error"])
        for t in summary.trials:
            writer.writerow(
                [getattr(t, c) for c in cols]
                + [t.config.get(k) for k in keys]
                + [t.mlflow_run_id, (t.error or "").splitlines()[0] if t.error else ""]
            )
        self.client.log_text(parent, buf.getvalue(), "trials.csv")

    def _log_learning_curves(self, parent: str, summary: SweepSummary) -> None:
        # The object API, not pyplot: no global figure state, no GUI backend, a light import.
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        fig = Figure(figsize=(8, 5))
        FigureCanvasAgg(fig)
        ax = fig.add_subplot()
        for t in summary.trials:
            if not t.mlflow_run_id:
                continue
            history = self.client.get_metric_history(t.mlflow_run_id, self.metric)
            if history:
                points = sorted((m.step, m.value) for m in history)
                ax.plot([p[0] for p in points], [p[1] for p in points], label=t.trial_id)
        ax.set_xlabel("env steps sampled")
        ax.set_ylabel(self.metric)
        ax.set_title(f"{summary.name}: learning curves")
        if summary.trials:
            ax.legend(fontsize="small", ncol=2)
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "learning_curves.png"
            fig.savefig(path, dpi=100)
            self.client.log_artifact(parent, str(path))

    def _log(
        self,
        run_id: str,
        *,
        params: dict[str, Any] | None = None,
        metrics: list[Metric] | None = None,
        tags: dict[str, str] | None = None,
    ) -> None:
        """log_batch within MLflow's per-request limits."""
        plist = [Param(k, _param_value(v)) for k, v in (params or {}).items()]
        for chunk in _chunks(plist, MAX_PARAMS):
            self.client.log_batch(run_id, params=chunk)
        for chunk in _chunks(list(metrics or []), MAX_METRICS):
            self.client.log_batch(run_id, metrics=chunk)
        tlist = [RunTag(k, v) for k, v in (tags or {}).items()]
        for chunk in _chunks(tlist, MAX_TAGS):
            self.client.log_batch(run_id, tags=chunk)


class _BackgroundWriter:
    """One daemon thread running logging calls in order; `flush` waits for the queue."""

    def __init__(self) -> None:
        import queue
        import threading

        self._queue: queue.Queue = queue.Queue()
        threading.Thread(target=self._run, name="mlflow-writer", daemon=True).start()

    def _run(self) -> None:
        import logging

        while True:
            job = self._queue.get()
            try:
                job()
            except Exception:  # noqa: BLE001 - a lost batch must not end the sweep
                logging.getLogger("tuner.mlflow").exception("MLflow logging failed")
            finally:
                self._queue.task_done()

    def submit(self, job: Any) -> None:
        """Queues a call."""
        self._queue.put(job)

    def flush(self) -> None:
        """Returns once every queued call has run."""
        self._queue.join()


def _short(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3g}"
    return json.dumps(value, default=str).replace(" ", "")[:20]
