"""Tune's private names: a Trainable rebuilt in its actor, PB2's new configs, a restored
Tuner's callbacks and pending decisions, a ResultGrid's trials."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def rebuild_in_place(
    trainable: Any, new_config: dict[str, Any], before_build: Callable[[], None]
) -> None:
    """Builds a Tune Trainable again, in its own actor, for the next trial (Tune's
    reuse_actors; called from reset_config, after Tune's reset has set the trial's info,
    storage and log dir): stop (the algorithm's cleanup, the system-usage monitor thread
    that __init__ starts anew, the log files), then __init__ with the new config exactly
    as a fresh actor runs it. Tune's reset zeroes the counters after. Log files
    (RunConfig's log_to_file, which tuner never sets) would not be carried over."""
    from ray.tune.result import TRIAL_INFO

    info, storage = trainable._trial_info, trainable._storage
    trainable.stop()
    before_build()
    trainable.__init__(config={**new_config, TRIAL_INFO: info}, storage=storage)


class PB2ConfigHook:
    """Mixin for a PB2 subclass: Tune's private new-config builder calls the subclass's
    `tuner_new_config(trial, trial_to_clone, tune_default)`."""

    def _get_new_config(self, trial: Any, trial_to_clone: Any) -> tuple[dict, dict]:
        return self.tuner_new_config(  # type: ignore[attr-defined]
            trial,
            trial_to_clone,
            super()._get_new_config,  # type: ignore[misc]
        )


def pb2_bounded_keys(pb2: Any) -> list[str]:
    """The keys a PB2 scheduler perturbs."""
    return list(pb2._hyperparam_bounds)


def set_restored_callbacks(tuner: Any, callbacks: list[Any]) -> None:
    """Replaces the callbacks of a Tuner restored from its pickled state."""
    tuner._local_tuner._run_config.callbacks = list(callbacks)


def result_grid_trials(result_grid: Any) -> list[Any]:
    """The Trial objects behind a ResultGrid (their status, id, error)."""
    analysis = getattr(result_grid, "_experiment_analysis", None)
    return list(getattr(analysis, "trials", None) or [])


# decisions of a live TuneController about in-flight saves and results, which Tune 2.60
# also writes into the experiment state's runner_data
_PENDING_DECISIONS = ("_cached_trial_decisions", "_queued_trial_decisions")


def forget_pending_decisions(experiment_path: str) -> int:
    """Drops, from every experiment state file of a Tune run at `experiment_path` (a
    local path or a pyarrow URI), the decisions its controller had pending on saves and
    results in flight. None of those is in flight after a restart; left in, a trial that
    failed while saving is stopped after the first iteration of its retry. Returns how
    many decisions were dropped."""
    import json

    import pyarrow.fs as pafs

    if "://" in experiment_path:
        fs, base = pafs.FileSystem.from_uri(experiment_path)
    else:
        fs, base = pafs.LocalFileSystem(), experiment_path
    selector = pafs.FileSelector(base, allow_not_found=True)
    dropped = 0
    for info in fs.get_file_info(selector):
        if not (info.base_name.startswith("experiment_state") and info.base_name.endswith(".json")):
            continue
        with fs.open_input_stream(info.path) as f:
            state = json.loads(f.read())
        runner = state.get("runner_data") or {}
        pending = sum(len(runner.get(k) or {}) for k in _PENDING_DECISIONS)
        if not pending:
            continue
        for key in _PENDING_DECISIONS:
            if key in runner:
                runner[key] = {}
        with fs.open_output_stream(info.path) as f:
            f.write(json.dumps(state).encode())
        dropped += pending
    return dropped


def optuna_told(searcher: Any, trial_id: str) -> bool:
    """Whether Tune's OptunaSearch `searcher` told its study the end of `trial_id`."""
    return trial_id in searcher._completed_trials


def optuna_forget(searcher: Any, trial_id: str) -> None:
    """Forgets the study trial of `trial_id` (told already): the searcher's next suggest
    for that Tune trial asks the study for a new one."""
    searcher._completed_trials.discard(trial_id)
    searcher._ot_trials.pop(trial_id, None)
