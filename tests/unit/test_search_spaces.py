"""Domains: bounds, membership and translation to Ray Tune."""

import numpy as np
import pytest
from pydantic import ValidationError
from ray.tune.search.sample import Categorical, Float, Integer

from tuner.algorithms import default_space
from tuner.search_spaces import Domain
from tuner.spec import ALGORITHMS


def test_randint_is_inclusive_on_both_ends():
    dom = Domain.model_validate({"randint": [1, 3]})
    tune_dom = dom.to_tune()
    assert isinstance(tune_dom, Integer)
    draws = {tune_dom.sample(random_state=np.random.default_rng(i)) for i in range(200)}
    assert draws == {1, 2, 3}
    assert dom.contains(3)
    assert not dom.contains(4)


def test_translations():
    assert isinstance(Domain.model_validate({"choice": [1, 2]}).to_tune(), Categorical)
    log = Domain.model_validate({"loguniform": [1e-4, 1e-2]}).to_tune()
    assert isinstance(log, Float)
    assert log.lower == 1e-4
    assert log.upper == 1e-2
    grid = Domain.model_validate({"grid": [4, 8]}).to_tune()
    assert grid == {"grid_search": [4, 8]}
    q = Domain.model_validate({"quniform": [0.1, 0.4, 0.05]})
    value = q.to_tune().sample(random_state=np.random.default_rng(0))
    assert q.contains(value)
    assert abs(value / 0.05 - round(value / 0.05)) < 1e-6


@pytest.mark.parametrize(
    "raw",
    [
        {"uniform": [1, 1]},
        {"loguniform": [-1, 1]},
        {"quniform": [0, 1, 0]},
        {"choice": []},
        {"uniform": [0, float("inf")]},
        {},
        {"normal": [0, 1]},
    ],
)
def test_bad_domains(raw):
    with pytest.raises(ValidationError):
        Domain.model_validate(raw)


@pytest.mark.parametrize("algo", ALGORITHMS)
def test_default_space_exists_for_every_algorithm(algo):
    space = default_space(algo)
    assert space
    assert all(d.kind != "grid" for d in space.values())
