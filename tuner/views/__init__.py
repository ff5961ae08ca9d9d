"""The shapes users see, one model per concept.

A sweep, a trial, the best trial, the MLflow links, metric points, the cluster (an
algorithm's: tuner/algorithms/_info.py).

`tuner run --output json`, every REST response and the web page use these models and
no others: the driver builds them from Tune's results, the store converts its rows to
them once, the routes return them. Nothing here imports Ray, FastAPI or SQLAlchemy.

The models live by resource: `_trials.py` (a trial, its metric history),
`_answer.py` (the best trial, confirmation, the Pareto front), `_sweeps.py` (a sweep,
its MLflow links), `_plans.py` (a plan, the example specs), `_problems.py` (`Issue`
and the error bodies), `_service.py` (health, the cluster, the statuses).
`ParetoMember`, the field types (`Confirmation`, `Importance`, `ImportancePedAnova`,
`Pareto`, `RankedBy`) and `StepValue` import from here too, outside `__all__` as before.
"""

from tuner.views._answer import FINAL_SCOPE, BestTrial, ConfirmedConfig, SearchBest
from tuner.views._answer import ParetoMember as ParetoMember
from tuner.views._plans import ExampleSpec, Plan
from tuner.views._problems import Issue, Problem, Problems
from tuner.views._service import ClusterView, Health, NodeView, StatusList
from tuner.views._sweeps import Confirmation as Confirmation
from tuner.views._sweeps import (
    ExperimentList,
    ExperimentView,
    MlflowLinks,
    SweepSummary,
)
from tuner.views._sweeps import Importance as Importance
from tuner.views._sweeps import ImportancePedAnova as ImportancePedAnova
from tuner.views._sweeps import Pareto as Pareto
from tuner.views._sweeps import RankedBy as RankedBy
from tuner.views._trials import (
    MetricPoint,
    MetricSeries,
    TrialList,
    TrialMetrics,
    TrialView,
    with_mlflow_url,
)
from tuner.views._trials import StepValue as StepValue

__all__ = [
    "FINAL_SCOPE",
    "BestTrial",
    "SearchBest",
    "ClusterView",
    "ConfirmedConfig",
    "ExampleSpec",
    "ExperimentList",
    "ExperimentView",
    "Health",
    "MetricPoint",
    "MetricSeries",
    "MlflowLinks",
    "Plan",
    "NodeView",
    "Issue",
    "Problem",
    "Problems",
    "StatusList",
    "SweepSummary",
    "TrialList",
    "TrialMetrics",
    "TrialView",
    "with_mlflow_url",
]
