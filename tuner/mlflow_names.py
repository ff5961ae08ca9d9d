"""Every name tuner writes into MLflow, spelled once: tags, params, metrics, artifact
paths, registered-model names and UI links.

The tracker (tuner/tracking/), the purge (tuner/purge.py), the reports and
the tests read them from here. Plain strings only: importing this module loads neither
MLflow nor Ray.
"""

from __future__ import annotations

import re

# -- tags: how runs are found again -------------------------------------------------------
TAG_PARENT = "mlflow.parentRunId"  # MLflow's own nesting tag
# ours are model training (runs, metrics, models), not GenAI (traces): earlier MLflow 3 UIs
# opened an experiment in the view this tag names; 3.17's goes by the link (`run_url`)
TAG_EXPERIMENT_KIND, EXPERIMENT_KIND = "mlflow.experimentKind", "custom_model_development"
TAG_RUN = "tuner.run"  # the sweep's run name (the service: the sweep id)
TAG_TRIAL = "tuner.trial_id"  # a child run's Tune trial id
TAG_KIND = "tuner.kind"  # KIND_SWEEP on the parent run, KIND_TRIAL on each child
KIND_SWEEP, KIND_TRIAL = "sweep", "trial"
TAG_STAGE = "tuner.stage"  # on each child: STAGE_SEARCH or STAGE_CONFIRM
STAGE_SEARCH, STAGE_CONFIRM = "search", "confirm"
TAG_ERROR = "tuner.error"  # the last line of a failed trial's error
TAG_RETRIES = "tuner.retries"  # how many times a trial was restarted after a failure
# on the parent of a warm-started sweep: the earlier sweep's run name and parent run id
TAG_WARM_FROM, TAG_WARM_RUN = "tuner.warm_start_from", "tuner.warm_start_run_id"
TAG_STATUS = "tuner.status"  # the sweep's outcome (statuses.SweepStatus) on the parent run
TAG_ERRORED = "tuner.errored_trials"  # on the parent: trials in ERROR after their retries
TAG_NODE_IP, TAG_NODE_ID, TAG_DEVICE = "tuner.node_ip", "tuner.node_id", "tuner.device"
TAG_CPU = "tuner.cpu"  # on each child: the CPU and torch's kernel level it trained on
TAG_REPLAY = "tuner.replay"  # DQN / SAC: "flat" or "rllib (why)" (tuner/rllib/_fast_replay.py)
TAG_BEST_TRIAL, TAG_BEST_RUN = "tuner.best_trial_id", "tuner.best_run_id"
# the answer's kind ("confirmation" or "search"), the trial its checkpoint comes from, its
# registered model version, and the search's own best trial beside it
TAG_BEST_SOURCE = "tuner.best_source"
TAG_BEST_CHECKPOINT_TRIAL = "tuner.best_checkpoint_trial_id"
TAG_BEST_MODEL = "tuner.best_model_version"
TAG_SEARCH_BEST_TRIAL = "tuner.search_best_trial_id"
# on a registered model version: the search trial whose config it is, the config, the
# checkpoint's seed and the score (the confirmed mean, else the search score)
TAG_MODEL_CONFIG_OF, TAG_MODEL_CONFIG = "tuner.config_of", "tuner.config"
TAG_MODEL_SEED, TAG_MODEL_SCORE = "tuner.seed", "tuner.score"
TAG_PARETO = "tuner.pareto"  # "true" on the child run of each Pareto front member
TAG_OBJECTIVES = "tuner.objectives"  # parent: the objectives' metrics, comma-joined
# what ran, with which versions (on the parent run)
TAG_ALGORITHM, TAG_ENV = "tuner.algorithm", "tuner.env"
TAG_SEARCH_METHOD, TAG_SCHEDULER, TAG_METRIC = (
    "tuner.search_method",
    "tuner.scheduler",
    "tuner.metric",
)
TAG_VERSION = "tuner.version"
TAG_RAY_VERSION, TAG_RLLIB_VERSION, TAG_GYM_VERSION = (
    "ray.version",
    "rllib.version",
    "gymnasium.version",
)
TAG_TORCH_VERSION, TAG_OPTUNA_VERSION = "torch.version", "optuna.version"
# A param MLflow already holds with another value (write-once) goes in as a tag with this
# prefix: `best.lr` -> tag `tuner.best.lr`.
MOVED_PARAM_PREFIX = "tuner."

# -- params ---------------------------------------------------------------------------
# what the sweep is, each named after the spec field it holds: on the parent run all
# but callbacks and module; on each child algorithm, env, wrappers, seed (the trial's),
# callbacks and module
PARAM_ALGORITHM, PARAM_ENV, PARAM_WRAPPERS = "algorithm", "env", "wrappers"
PARAM_SEARCH_METHOD, PARAM_NUM_SAMPLES = "search.method", "search.num_samples"
PARAM_SCHEDULER = "scheduler"  # the spec's scheduler.type
PARAM_METRIC, PARAM_MODE, PARAM_SEED = "metric", "mode", "seed"
PARAM_CALLBACKS, PARAM_MODULE = "callbacks", "module"
FIXED_PREFIX = "fixed."  # a child run's fixed settings: fixed.<flattened key>
BEST_PREFIX = "best."  # the parent run's best config: best.<sampled key>
PARAM_BEST_TRIAL, PARAM_BEST_SEED = "best.trial_id", "best.seed"

# -- metrics: the curated per-iteration set (flattened RLlib result keys) -----------------
RETURN_KEY = "env_runners/episode_return_mean"  # the default metric, the return target
RETURN_MAX_KEY, RETURN_MIN_KEY = "env_runners/episode_return_max", "env_runners/episode_return_min"
LENGTH_KEY, EPISODES_KEY = "env_runners/episode_len_mean", "env_runners/num_episodes"
RESULT_METRICS: tuple[str, ...] = (
    RETURN_KEY,
    RETURN_MAX_KEY,
    RETURN_MIN_KEY,
    LENGTH_KEY,
    "num_env_steps_sampled_lifetime",
    "training_iteration",
    "time_this_iter_s",
    "time_total_s",
    f"evaluation/{RETURN_KEY}",
)
# a multi-agent run's returns per agent and per policy (RLModule), each logged as
# <group>/<agent or policy id>; env_runners/episode_return_mean is their sum over agents
AGENT_RETURNS = "env_runners/agent_episode_returns_mean"
MODULE_RETURNS = "env_runners/module_episode_returns_mean"
PER_ID_METRICS: tuple[str, ...] = (
    AGENT_RETURNS,
    MODULE_RETURNS,
    f"evaluation/{AGENT_RETURNS}",
    f"evaluation/{MODULE_RETURNS}",
)
# learner stats whose name holds one of these words are logged as learners/<module>/<key>
LEARNER_WORDS: tuple[str, ...] = ("loss", "entropy", "mean_kl", "qf_mean", "alpha_value")
LEARNERS_PREFIX = "learners/"
# pbt/pb2 only: the searched values each iteration trained with (a child run's params
# keep the values the trial started with): hparams/<search-space key>
HPARAMS_PREFIX = "hparams/"
STEP_KEY = "num_env_steps_sampled_lifetime"  # the x axis of every metric history
ITERATION_KEY = "training_iteration"


# the parent run's statistics of the best confirmed config
CONFIRMED_MEAN, CONFIRMED_STD = "confirmed.mean", "confirmed.std"
CONFIRMED_CI_LOW, CONFIRMED_CI_HIGH = "confirmed.ci95_low", "confirmed.ci95_high"
CONFIRMED_IQM = "confirmed.iqm"
CONFIRMATION_ARTIFACT = "confirmation.json"  # parent: every confirmed config
PARETO_ARTIFACT = "pareto.json"  # parent: the Pareto front, objectives and members


# the parent run's hyperparameter importance (tuner/importance.py): importance.<key> (fANOVA)
IMPORTANCE_PREFIX = "importance."
IMPORTANCE_ARTIFACT = "importance.json"  # parent: fANOVA and PED-ANOVA, every sampled key


def importance_metric(key: str) -> str:
    """The parent run's metric holding a sampled key's importance (characters MLflow
    refuses in a metric name, and '/' and ':', which it may read as paths or refuse on
    Windows, become '_')."""
    return IMPORTANCE_PREFIX + re.sub(r"[^\w.\- ]", "_", key)


def best_metric(metric: str) -> str:
    """The parent run's metric holding the best trial's value of `metric`."""
    return f"{BEST_PREFIX}{metric}"


# -- artifacts --------------------------------------------------------------------------
SPEC_ARTIFACT = "spec.yaml"  # parent: the spec as validated
BEST_CONFIG_ARTIFACT = "best_config.json"  # parent: the best trial
TRIALS_JSON_ARTIFACT, TRIALS_CSV_ARTIFACT = "trials.json", "trials.csv"  # parent
CURVES_ARTIFACT = "learning_curves.png"  # parent
RLLIB_CONFIG_ARTIFACT = "rllib_config.json"  # child: the full config RLlib got
ERROR_ARTIFACT = "error.txt"  # child of a failed trial
CHECKPOINTS_DIR = "checkpoints"  # child: checkpoints/<checkpoint_000003>/...


def checkpoint_artifact(checkpoint_name: str) -> str:
    """Artifact path of one uploaded checkpoint of a trial run."""
    return f"{CHECKPOINTS_DIR}/{checkpoint_name}"


def registered_model(experiment_name: str) -> str:
    """The registered model that holds a sweep name's best checkpoints."""
    return f"{experiment_name}-best"


# -- URIs -------------------------------------------------------------------------------
RUNS_URI, MODELS_URI = "runs:/", "models:/"  # MLflow's schemes: a run's artifact, a model


def checkpoint_source(run_id: str, checkpoint_name: str) -> str:
    """runs:/<run>/checkpoints/<name>: one uploaded checkpoint of a trial run."""
    return f"{RUNS_URI}{run_id}/{checkpoint_artifact(checkpoint_name)}"


def model_version_uri(name: str, version: str | int) -> str:
    """models:/<name>/<version>: a registered model version (`MlflowLinks.model_version`)."""
    return f"{MODELS_URI}{name}/{version}"


# models:/<name>/latest: MLflow's word for a model's newest version
LATEST_VERSION = "latest"


def parse_model_version_uri(uri: str) -> tuple[str, str | None] | None:
    """(name, version) of a models:/<name>[/<version>] URI (version None when absent,
    else as written: a number or LATEST_VERSION); None for anything else, an alias URI
    models:/<name>@<alias> included (`parse_model_alias_uri`)."""
    if not uri.startswith(MODELS_URI) or parse_model_alias_uri(uri) is not None:
        return None
    name, slash, version = uri.removeprefix(MODELS_URI).rpartition("/")
    return (name, version or None) if slash else (version, None)


def parse_model_alias_uri(uri: str) -> tuple[str, str] | None:
    """(name, alias) of a models:/<name>@<alias> URI (MLflow's alias form); None for
    anything else."""
    if not uri.startswith(MODELS_URI):
        return None
    rest = uri.removeprefix(MODELS_URI)
    # MLflow reads the last '@' of a URI without a version path as the alias mark
    name, at, alias = rest.rpartition("@")
    return (name, alias) if at and "/" not in rest else None


# MLflow's UI opens every experiment and run in its GenAI view (traces, judges,
# evaluations) unless the link asks for model training, whatever the experiment's tags
# say. It reads the choice from the query of its hash route: after the '#/...' path; a
# query before the '#' is never seen and leaves the GenAI view.
UI_MODEL_TRAINING = "?workflowType=machine_learning"


def experiment_url(ui_url: str | None, experiment_id: str | None) -> str | None:
    """Link to an experiment's runs table in the MLflow UI, in its model-training view
    (None without a UI or an experiment)."""
    if not (ui_url and experiment_id):
        return None
    return f"{ui_url.rstrip('/')}/#/experiments/{experiment_id}/runs{UI_MODEL_TRAINING}"


def run_url(ui_url: str | None, experiment_id: str | None, run_id: str | None) -> str | None:
    """Link to a run's page in the MLflow UI, in its model-training view (None without a
    UI or a run)."""
    if not (ui_url and experiment_id and run_id):
        return None
    return f"{ui_url.rstrip('/')}/#/experiments/{experiment_id}/runs/{run_id}{UI_MODEL_TRAINING}"
