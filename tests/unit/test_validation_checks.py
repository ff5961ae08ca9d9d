"""Validation is a list of named checks run in one pass (tuner/validation/_checks.py):
the pipeline reports in the list's order, and a check that must stop it stops it."""

from __future__ import annotations

import functools
import inspect

import pytest

import tuner.validation._validate
from tuner.spec import ExperimentSpec, SpecError
from tuner.validation import validate_spec
from tuner.validation._checks import (
    CHECKS,
    check_config_keys,
    check_env_id,
    check_rllib_builds,
    stop_where_problems_stand,
)


def ppo(**fields: object) -> ExperimentSpec:
    return ExperimentSpec.model_validate(
        {"name": "checks", "algorithm": "PPO", "env": "CartPole-v1", **fields}
    )


def refused(spec: ExperimentSpec) -> list[str]:
    with pytest.raises(SpecError) as err:
        validate_spec(spec, allowed_modules=[], build_env=False)
    return [issue.loc for issue in err.value.issues]


def ran(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Runs the real checks, recording the name of each one that runs."""
    names: list[str] = []

    def recorded(check):
        @functools.wraps(check)
        def run(ctx):
            names.append(check.__name__)
            return check(ctx)

        return run

    monkeypatch.setattr(tuner.validation._validate, "CHECKS", tuple(map(recorded, CHECKS)))
    return names


def test_the_checks_are_named_functions_each_with_a_docstring():
    names = [check.__name__ for check in CHECKS]
    assert len(set(names)) == len(names), "a check listed twice"
    for check in CHECKS:
        assert inspect.isfunction(check), check
        assert check.__name__ != "<lambda>", check
        assert check.__module__ == "tuner.validation._checks", check.__name__
        assert (check.__doc__ or "").strip(), f"{check.__name__} has no docstring"
        assert list(inspect.signature(check).parameters) == ["ctx"], check.__name__


def test_two_problems_of_two_checks_come_in_the_list_order(monkeypatch):
    spec = ppo(env="CartPol-v1", config={"lerning_rate": 0.001})
    assert CHECKS.index(check_config_keys) < CHECKS.index(check_env_id)
    assert refused(spec) == ["config.lerning_rate", "env"]
    # the list's order is the pipeline's: the two checks swapped, their problems swap too
    swapped = list(CHECKS)
    a, b = swapped.index(check_config_keys), swapped.index(check_env_id)
    swapped[a], swapped[b] = swapped[b], swapped[a]
    monkeypatch.setattr(tuner.validation._validate, "CHECKS", tuple(swapped))
    assert refused(spec) == ["env", "config.lerning_rate"]


def test_a_problem_of_the_text_stops_the_pass_before_anything_is_built(monkeypatch):
    names = ran(monkeypatch)
    assert refused(ppo(config={"lerning_rate": 0.001})) == ["config.lerning_rate"]
    stop = CHECKS.index(stop_where_problems_stand)
    assert names == [check.__name__ for check in CHECKS[: stop + 1]]


def test_a_config_rllib_rejects_stops_the_pass_there(monkeypatch):
    names = ran(monkeypatch)
    spec = ppo(config={"train_batch_size_per_learner": 64, "minibatch_size": 128})
    assert refused(spec) == ["config"]
    assert names == [check.__name__ for check in CHECKS[: CHECKS.index(check_rllib_builds) + 1]]


def test_a_valid_spec_runs_every_check(monkeypatch):
    names = ran(monkeypatch)
    validate_spec(ppo(), allowed_modules=[], build_env=False)
    assert names == [check.__name__ for check in CHECKS]
