"""Optuna's sampler a spec leaves out (tuner/spec/scheduler_defaults.yaml `optuna`): TPE
with Optuna's own random start (10, at most the trials; a shorter one showed no gain).
The values reach Optuna as set, and the plan shows them."""

from __future__ import annotations

import optuna
import pytest

from tuner.spec import SpecError, parse_spec, resolve_space, resolved_sampler, sampler_in_force
from tuner.sweep import optuna_sampler
from tuner.validation import plan_spec


def spec(trials: int = 16, method: str = "optuna", sampler: dict | None = None):
    search: dict = {"method": method, "num_samples": trials}
    if sampler is not None:
        search["sampler"] = sampler
    return parse_spec(
        {
            "name": "s",
            "algorithm": "PPO",
            "env": "CartPole-v1",
            "search": search,
            "stop": {"timesteps_total": 20_000},
        }
    )


def startup_of(sampler: optuna.samplers.BaseSampler) -> int:
    # Optuna keeps the random start as set on the sampler (TPESampler and GPSampler alike)
    return sampler._n_startup_trials


@pytest.mark.parametrize(("trials", "startup"), [(2, 2), (8, 8), (16, 10), (40, 10), (200, 10)])
def test_the_random_start_is_optunas_own_10_at_most_the_trials(trials, startup):
    s = spec(trials)
    sampler = optuna_sampler(s, resolve_space(s))
    assert isinstance(sampler, optuna.samplers.TPESampler)
    assert startup_of(sampler) == startup


def test_a_gp_sampler_and_an_own_random_start_reach_optuna():
    gp = spec(16, sampler={"type": "gp"})
    built = optuna_sampler(gp, resolve_space(gp))
    assert isinstance(built, optuna.samplers.GPSampler)
    assert startup_of(built) == 10
    own = spec(16, sampler={"n_startup_trials": 4})
    assert startup_of(optuna_sampler(own, resolve_space(own))) == 4


def test_the_sampler_is_seeded_by_the_spec_seed():
    s = spec(16)
    first = optuna_sampler(s, resolve_space(s))
    again = optuna_sampler(s, resolve_space(s))
    draws = []
    for sampler in (first, again):
        study = optuna.create_study(sampler=sampler)
        draws.append([study.ask().suggest_float("x", 0, 1) for _ in range(3)])
    assert draws[0] == draws[1]


def test_a_sampler_without_optuna_is_refused_naming_the_field_and_the_method():
    with pytest.raises(SpecError) as caught:
        spec(8, method="random", sampler={"type": "gp"})
    text = str(caught.value)
    assert "sampler" in text
    assert "'random'" in text


def test_an_unknown_sampler_type_is_refused():
    with pytest.raises(SpecError) as caught:
        spec(8, sampler={"type": "cmaes"})
    assert "search.sampler.type" in str(caught.value)


def test_grid_and_random_search_have_no_sampler():
    s = spec(8, method="random")
    assert resolved_sampler(s, resolve_space(s)) is None
    assert sampler_in_force(s, resolve_space(s)) is None


def test_the_plan_shows_the_sampler_in_force_and_what_was_derived():
    derived = plan_spec(spec(16), [{"CPU": 2.0}]).sampler
    assert derived == {
        "type": "tpe",
        "n_startup_trials": 10,
        "derived": ["type", "n_startup_trials"],
    }
    own = plan_spec(spec(16, sampler={"type": "gp"}), [{"CPU": 2.0}]).sampler
    assert own["derived"] == ["n_startup_trials"]
    assert plan_spec(spec(8, method="random"), [{"CPU": 2.0}]).sampler is None
