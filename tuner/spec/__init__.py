"""The spec: the one schema of a sweep.

Its file format, request body and JSON schema; strict parsing of untrusted text into
it, the code a spec may name, and the space it searches.

It imports neither Ray nor FastAPI, so every process (CLI, API, driver) can load and
check a spec. The checks that need RLlib (its keys, a dry build, the fit) sit above, in
tuner.validation.
"""

from tuner.spec._code_refs import (
    check_code_refs,
    check_space_code_refs,
    import_paths,
    module_allowed,
    resolve_code_refs,
    resolve_paths,
)
from tuner.spec._errors import SpecError, SpecIssue, did_you_mean, issues_from_validation_error
from tuner.spec._load import json_schema, load_spec, parse_spec
from tuner.spec._models import ExperimentSpec
from tuner.spec._multi_agent import MultiAgentSpec
from tuner.spec._safe_input import NestingTooDeep, check_data, load_json_strict, load_yaml_strict
from tuner.spec._schedule import (
    bracket_shares,
    budget_in,
    budget_unit,
    next_bracket,
    resolved_sampler,
    resolved_scheduler,
    sampler_in_force,
    scheduler_in_force,
    scheduler_metric,
    search_trials,
)
from tuner.spec._scheduler_section import SchedulerSpec
from tuner.spec._sections import (
    ALGORITHMS,
    GYM_ID_RE,
    IMPORT_PATH_RE,
    POPULATION_SCHEDULERS,
    PRESETS,
    SCOPES,
    CheckpointSpec,
    ConfirmSpec,
    EvaluationSpec,
    ObjectiveSpec,
    RaceSpec,
    ResourcesSpec,
    SamplerSpec,
    SearchSpec,
    StopSpec,
    is_ale_id,
)
from tuner.spec._setting_types import (
    integral_floats_as_ints,
    number_default,
    number_setting_issues,
)
from tuner.spec._space import resolve_space

__all__ = [
    "ALGORITHMS",
    "GYM_ID_RE",
    "IMPORT_PATH_RE",
    "POPULATION_SCHEDULERS",
    "PRESETS",
    "SCOPES",
    "CheckpointSpec",
    "ConfirmSpec",
    "EvaluationSpec",
    "ExperimentSpec",
    "MultiAgentSpec",
    "ObjectiveSpec",
    "NestingTooDeep",
    "ResourcesSpec",
    "RaceSpec",
    "SamplerSpec",
    "SchedulerSpec",
    "SearchSpec",
    "SpecError",
    "SpecIssue",
    "StopSpec",
    "bracket_shares",
    "budget_in",
    "budget_unit",
    "check_code_refs",
    "check_data",
    "check_space_code_refs",
    "import_paths",
    "integral_floats_as_ints",
    "is_ale_id",
    "did_you_mean",
    "issues_from_validation_error",
    "json_schema",
    "load_json_strict",
    "load_spec",
    "load_yaml_strict",
    "module_allowed",
    "next_bracket",
    "number_default",
    "number_setting_issues",
    "parse_spec",
    "resolve_code_refs",
    "resolve_paths",
    "resolve_space",
    "resolved_sampler",
    "resolved_scheduler",
    "sampler_in_force",
    "scheduler_in_force",
    "scheduler_metric",
    "search_trials",
]
