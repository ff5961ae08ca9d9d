"""MLflow tracking of a sweep as a Tune callback: one parent run per sweep, one nested
child run per trial, curated metrics in batches, the checkpoints a trial keeps uploaded.

Ray's MLflowLoggerCallback logs hundreds of config keys as params and config numbers as
metrics on every iteration, makes flat runs and uploads no checkpoints; this one does
not. Runs are found again by tags (tuner/mlflow_names.py), so a resumed sweep continues
the same parent run and never duplicates a child. The sweep's result is logged by
_mlflow_report.py.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Sequence
from typing import Any

from mlflow.entities import Metric
from pydantic import BaseModel, Field
from ray.tune import Callback

from tuner import mlflow_names as names
from tuner.results import retries_of
from tuner.rllib import (
    CONFIRM_KEY,
    apply_values,
    as_trial_runs,
    derived_settings,
    fixed_settings,
    sampled_values,
    seed_of,
    stage_of,
)
from tuner.spec import POPULATION_SCHEDULERS, ExperimentSpec
from tuner.statuses import TrialStatus
from tuner.tracking._mlflow_metrics import flatten, number, result_metrics
from tuner.tracking._mlflow_report import log_sweep_result
from tuner.tracking._mlflow_writer import (
    RUN_FAILED,
    RUN_FINISHED,
    RUN_KILLED,
    RUN_RUNNING,
    RunWriter,
)
from tuner.tracking._trial_errors import error_text, last_line
from tuner.views import MlflowLinks, SweepSummary, TrialView


class TrackingConfig(BaseModel):
    """Where a sweep is tracked in MLflow."""

    tracking_uri: str
    experiment_name: str | None = Field(None, description="Default: the spec name.")
    artifact_location: str | None = Field(
        None, description="Artifact root for experiments we create (embedded default)."
    )
    ui_url: str | None = Field(None, description="MLflow UI base URL for links.")

    def run_url(self, experiment_id: str, run_id: str) -> str | None:
        """Link to a run in the MLflow UI.

        Args:
            experiment_id: MLflow's experiment id.
            run_id: MLflow's run id.

        Returns:
            The link, in the UI's model-training view; None without a UI URL.
        """
        return names.run_url(self.ui_url, experiment_id, run_id)


def tracking_tags(spec: ExperimentSpec) -> dict[str, str]:
    """Tags of a sweep's parent run: what ran, and with which versions."""
    from importlib import metadata

    import gymnasium
    import ray

    import tuner

    return {
        names.TAG_ALGORITHM: spec.algorithm,
        names.TAG_ENV: spec.env or "",
        names.TAG_SEARCH_METHOD: spec.search.method,
        names.TAG_SCHEDULER: spec.scheduler.type,
        names.TAG_METRIC: spec.metric,
        names.TAG_VERSION: tuner.__version__,
        names.TAG_RAY_VERSION: ray.__version__,
        names.TAG_RLLIB_VERSION: ray.__version__,
        names.TAG_GYM_VERSION: gymnasium.__version__,
        names.TAG_TORCH_VERSION: metadata.version("torch"),
        names.TAG_OPTUNA_VERSION: metadata.version("optuna"),
    }


def _short(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3g}"
    return json.dumps(value, default=str).replace(" ", "")[:20]


class MLflowTracker(Callback):
    """Tune callback: parent run per sweep, child run per trial, checkpoints as artifacts.

    Only plain data as attributes (Tune pickles callbacks into its state); the MLflow
    writer is made lazily and left out of the pickle.

    Args:
        spec: The sweep's spec.
        tracking_uri: The MLflow tracking URI.
        run_name: The parent run's name.
        space_keys: The search space's keys (logged as each trial's params).
        experiment_name: The MLflow experiment (default: the spec name).
        artifact_location: The artifact root for experiments it creates.
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
        self._runs: RunWriter | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_runs"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        state.pop("_client", None)  # states pickled when the tracker held the client
        state.pop("_writer", None)
        state.setdefault("_runs", None)
        self.__dict__.update(state)

    @property
    def spec(self) -> ExperimentSpec:
        """The sweep's spec."""
        return ExperimentSpec.model_validate(self.spec_json)

    @property
    def runs(self) -> RunWriter:
        """The writer bound to this tracker's URI (made on first use)."""
        if self._runs is None:
            self._runs = RunWriter(self.tracking_uri)
        return self._runs

    @property
    def client(self) -> Any:
        """An MlflowClient bound to this tracker's URI (never the global one)."""
        return self.runs.client

    def flush(self) -> None:
        """Waits until every queued metric batch is in MLflow."""
        if self._runs is not None:
            self._runs.flush()

    # -- the parent run -------------------------------------------------------------

    def start(self) -> str:
        """Finds or creates the experiment and the sweep's parent run.

        Returns:
            The parent run's id.
        """
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
                self.experiment_name,
                artifact_location=location,
                tags={names.TAG_EXPERIMENT_KIND: names.EXPERIMENT_KIND},
            )
        else:
            self.experiment_id = exp.experiment_id
            if names.TAG_EXPERIMENT_KIND not in exp.tags:  # made before tuner tagged it, or by hand
                self.client.set_experiment_tag(
                    self.experiment_id, names.TAG_EXPERIMENT_KIND, names.EXPERIMENT_KIND
                )
        found = self.client.search_runs(
            [self.experiment_id],
            filter_string=f"tags.`{names.TAG_RUN}` = '{self.run_name}' and "
            f"tags.`{names.TAG_KIND}` = '{names.KIND_SWEEP}'",
            max_results=1,
        )
        if found:
            self.parent_run_id = found[0].info.run_id
            self.client.update_run(self.parent_run_id, status=RUN_RUNNING)
            return self.parent_run_id
        tags = {
            names.TAG_RUN: self.run_name,
            names.TAG_KIND: names.KIND_SWEEP,
            **tracking_tags(self.spec),
        }
        run = self.client.create_run(self.experiment_id, run_name=self.run_name, tags=tags)
        self.parent_run_id = run.info.run_id
        spec = self.spec
        params = {
            names.PARAM_ALGORITHM: spec.algorithm,
            names.PARAM_ENV: spec.env or "",
            **({names.PARAM_WRAPPERS: spec.wrappers} if spec.wrappers else {}),
            names.PARAM_SEARCH_METHOD: spec.search.method,
            names.PARAM_NUM_SAMPLES: spec.search.num_samples,
            names.PARAM_SCHEDULER: spec.scheduler.type,
            names.PARAM_METRIC: spec.metric,
            names.PARAM_MODE: spec.mode,
            names.PARAM_SEED: spec.seed,
        }
        self.runs.log(self.parent_run_id, params=params)
        self.client.log_text(self.parent_run_id, self.spec_yaml, names.SPEC_ARTIFACT)
        return self.parent_run_id

    def setup(self, **info: Any) -> None:
        self.start()

    # -- child runs -----------------------------------------------------------------

    def find_child(self, trial_id: str) -> str | None:
        """The run id of a trial's child run, if there is one.

        Args:
            trial_id: Tune's trial id.

        Returns:
            The run id, or None.
        """
        if trial_id in self.child_runs:
            return self.child_runs[trial_id]
        found = self.client.search_runs(
            [self.experiment_id],
            filter_string=f"tags.`{names.TAG_TRIAL}` = '{trial_id}' and "
            f"tags.`{names.TAG_PARENT}` = '{self.parent_run_id}'",
            max_results=1,
        )
        return found[0].info.run_id if found else None

    def _child_run(self, trial: Any) -> str:
        trial_id = trial.trial_id
        if trial_id in self.child_runs:
            return self.child_runs[trial_id]
        self.start()
        run_id = self.find_child(trial_id)
        if run_id is not None:
            self.client.update_run(run_id, status=RUN_RUNNING)
            history = self.client.get_metric_history(run_id, names.ITERATION_KEY)
            self.last_logged[trial_id] = int(max((m.value for m in history), default=0))
        else:
            run_id = self._create_child(trial, self.parent_run_id)
        self.child_runs[trial_id] = run_id
        return run_id

    def _create_child(self, trial: Any, parent: str) -> str:
        spec = self.spec
        sampled = sampled_values(trial.config, self.space_keys)
        short = ",".join(f"{k.split('.')[-1]}={_short(v)}" for k, v in sampled.items())
        name = f"{trial.trial_id} {short}"[:250]
        tags = {
            names.TAG_PARENT: parent,
            names.TAG_TRIAL: trial.trial_id,
            names.TAG_RUN: self.run_name,
            names.TAG_KIND: names.KIND_TRIAL,
            names.TAG_STAGE: stage_of(trial.config),
        }
        run = self.client.create_run(self.experiment_id, run_name=name, tags=tags)
        params: dict[str, Any] = {
            names.PARAM_ALGORITHM: spec.algorithm,
            names.PARAM_ENV: spec.env or "",
            **({names.PARAM_WRAPPERS: spec.wrappers} if spec.wrappers else {}),
            names.PARAM_SEED: seed_of(trial.config, trial.trial_id, spec.seed),
        }
        if spec.callbacks:
            params[names.PARAM_CALLBACKS] = ",".join(spec.callbacks)
        if spec.module:
            params[names.PARAM_MODULE] = spec.module
        params.update(
            {f"{names.FIXED_PREFIX}{k}": v for k, v in flatten(fixed_settings(spec)).items()}
        )
        params.update(sampled)
        config = {k: v for k, v in trial.config.items() if not k.startswith("__")}
        confirm = config.pop(CONFIRM_KEY, None)
        if isinstance(confirm, dict):  # what the confirmation trial really ran with
            config = apply_values(config, confirm["values"])
            config["seed"] = confirm["seed"]
        # what the trial sets beyond the spec: the held ratio, a default's env count
        derived_config, derived_resources = derived_settings(config, spec)
        params.update(
            {
                f"{names.FIXED_PREFIX}{k}": v
                for k, v in {**derived_config, **derived_resources}.items()
            }
        )
        config = as_trial_runs(config, spec.algorithm)  # as the trial sets it
        self.runs.log(run.info.run_id, params=params)
        self.client.log_text(
            run.info.run_id,
            json.dumps(config, indent=1, default=str),
            names.RLLIB_CONFIG_ARTIFACT,
        )
        return run.info.run_id

    def note_warm_start(self, source: str, parent_run_id: str) -> None:
        """Tags the parent run with the earlier sweep a warm start reuses.

        Its run name and parent run, which the MLflow UI opens by id.

        Args:
            source: What the spec's `search.warm_start.from` named.
            parent_run_id: The earlier sweep's parent run.
        """
        parent = self.start()
        tags = {names.TAG_WARM_FROM: source, names.TAG_WARM_RUN: parent_run_id}
        self.runs.log(parent, tags=tags)

    def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._child_run(trial)

    def on_trial_result(
        self, iteration: int, trials: list, trial: Any, result: dict, **info: Any
    ) -> None:
        run_id = self._child_run(trial)
        it = int(result.get(names.ITERATION_KEY) or 0)
        if it <= self.last_logged.get(trial.trial_id, 0):
            return  # re-run after a restore from an older checkpoint: already logged
        self.last_logged[trial.trial_id] = it
        step = int(result.get(names.STEP_KEY) or it)
        now = int(time.time() * 1000)
        metrics = result_metrics(result, (self.metric,))
        if self.spec.scheduler.type in POPULATION_SCHEDULERS:
            metrics.update(self._hparams(result, trial))
        batch = [Metric(k, v, now, step) for k, v in metrics.items()]
        # Off Tune's loop: the next iteration is scheduled only after this callback returns.
        runs = self.runs
        runs.submit(lambda: runs.log(run_id, metrics=batch))
        if trial.trial_id not in self.tagged_nodes:
            info_ = result.get("tuner") or {}
            tags = {
                names.TAG_NODE_IP: result.get("node_ip"),
                names.TAG_NODE_ID: info_.get("node_id"),
                names.TAG_DEVICE: info_.get("device"),
                names.TAG_CPU: info_.get("cpu"),
                names.TAG_REPLAY: info_.get("replay"),
            }
            runs.log(run_id, tags={k: str(v) for k, v in tags.items() if v})
            self.tagged_nodes.add(trial.trial_id)

    def _hparams(self, result: dict, trial: Any) -> dict[str, float]:
        """pbt/pb2: the searched values this iteration trained with, as metrics
        (`hparams/<key>`): an exploit changes them mid-trial, and the child run's params
        (write-once) keep the values the trial started with. Read from the result's own
        config (the trainable's): by the time callbacks see a result, Tune's trial
        config may already hold the values of the exploit this result set off."""
        config = result.get("config")
        if not isinstance(config, dict):
            config = trial.config
        values = sampled_values(config, self.space_keys)
        out = {}
        for key, value in values.items():
            num = number(value)
            if num is not None:
                out[f"{names.HPARAMS_PREFIX}{key}"] = num
        return out

    def on_trial_recover(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        """A failed trial that Tune restarts from its last checkpoint: its run stays
        open, with the error and the retry count tagged."""
        run_id = self._child_run(trial)
        tags = {
            names.TAG_ERROR: last_line(error_text(trial)),
            names.TAG_RETRIES: str(retries_of(trial.num_failures, False)),
        }
        self.runs.log(run_id, tags=tags)

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self.flush()
        run_id = self._child_run(trial)
        if trial.num_failures:
            tags = {names.TAG_RETRIES: str(retries_of(trial.num_failures, False))}
            self.runs.log(run_id, tags=tags)
        self._log_checkpoints(run_id, trial)
        self.client.set_terminated(run_id, status=RUN_FINISHED)
        self.finalized.add(trial.trial_id)

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self.flush()
        run_id = self._child_run(trial)
        text = error_text(trial)
        self.client.log_text(run_id, text or "unknown error", names.ERROR_ARTIFACT)
        last = last_line(text)
        retries = str(retries_of(trial.num_failures, True))
        self.runs.log(run_id, tags={names.TAG_ERROR: last, names.TAG_RETRIES: retries})
        self._log_checkpoints(run_id, trial)
        self.client.set_terminated(run_id, status=RUN_FAILED)
        self.finalized.add(trial.trial_id)

    def on_experiment_end(self, trials: list, **info: Any) -> None:
        self.flush()
        for trial in trials:
            if trial.trial_id not in self.child_runs or trial.trial_id in self.finalized:
                continue
            if trial.status == TrialStatus.TERMINATED:  # ended by the sweep (stop_on_target,
                self.on_trial_complete(0, trials, trial)  # budget): Tune calls no on_trial_complete
            elif trial.status == TrialStatus.ERROR:
                self.on_trial_error(0, trials, trial)
            else:  # an interrupt left it unfinished: KILLED until a resume reopens it
                self.client.set_terminated(self.child_runs[trial.trial_id], status=RUN_KILLED)

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
            artifact = names.checkpoint_artifact(name)
            if isinstance(fs, pafs.LocalFileSystem):
                self.client.log_artifacts(run_id, info.path, artifact)
                continue
            with tempfile.TemporaryDirectory() as tmp:  # object-store storage: stage locally
                pafs.copy_files(info.path, tmp, source_filesystem=fs)
                self.client.log_artifacts(run_id, tmp, artifact)

    # -- the sweep's result -----------------------------------------------------------

    def link_trials(self, trials: Sequence[TrialView]) -> None:
        """Sets each trial's `mlflow_run_id` to its child run, once its metrics are in.

        Args:
            trials: The sweep's trials (changed in place).
        """
        self.flush()
        self.start()
        for view in trials:
            view.mlflow_run_id = self.find_child(view.trial_id)

    def finish(self, summary: SweepSummary) -> MlflowLinks:
        """Logs the sweep's result on the parent run (_mlflow_report.py).

        Args:
            summary: The sweep's summary.

        Returns:
            Where it landed (`url` left to the caller, who knows the UI).
        """
        self.link_trials(summary.trials)
        runs = {view.trial_id: view.mlflow_run_id for view in summary.trials}
        for member in summary.pareto:
            member.mlflow_run_id = runs.get(member.trial_id)
        return log_sweep_result(self, summary)
