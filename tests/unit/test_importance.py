"""Hyperparameter importance (tuner/importance.py): the finished trials as an Optuna study,
ranked by fANOVA and PED-ANOVA."""

from __future__ import annotations

import ast
import math
import random
from pathlib import Path

import pytest

import tuner.importance
from tuner.importance import EVALUATORS, importance, importances
from tuner.search_spaces import Domain
from tuner.views import TrialView

SPACE = {
    "lr": Domain(loguniform=(1e-5, 1e-2)),
    "gamma": Domain(choice=[0.98, 0.99, 0.995]),
    "num_epochs": Domain(randint=(1, 10)),
}


def synthetic(n: int = 30, seed: int = 0, sign: float = 1.0) -> list[TrialView]:
    """Only lr drives the value (a peak at 10^-3.5, on a log scale); gamma and num_epochs
    are sampled but do nothing."""
    rng = random.Random(seed)
    trials = []
    for i in range(n):
        lr = 10 ** rng.uniform(-5, -2)
        value = 100 - 40 * (math.log10(lr) + 3.5) ** 2 + rng.gauss(0, 3)
        trials.append(
            TrialView(
                trial_id=f"t_{i:05d}",
                status="TERMINATED",
                config={
                    "lr": lr,
                    "gamma": rng.choice([0.98, 0.99, 0.995]),
                    "num_epochs": rng.randint(1, 10),
                },
                score=sign * value,
            )
        )
    return trials


@pytest.mark.parametrize("evaluator", EVALUATORS)
def test_the_key_that_drives_the_metric_ranks_first(evaluator):
    out = importance(synthetic(), SPACE, "max", evaluator=evaluator)
    assert list(out)[0] == "lr"
    assert out["lr"] > 0.6
    assert out["lr"] > 4 * max(out["gamma"], out["num_epochs"])
    assert set(out) == set(SPACE)
    assert math.isclose(sum(out.values()), 1.0, abs_tol=1e-4)
    assert list(out.values()) == sorted(out.values(), reverse=True)


def test_both_evaluators_at_once_agree_with_each_alone():
    both = importances(synthetic(), SPACE, "max")
    assert set(both) == {"fanova", "ped_anova"}
    for name in EVALUATORS:
        assert both[name] == importance(synthetic(), SPACE, "max", evaluator=name)


def test_too_few_finished_trials_give_none():
    trials = synthetic(n=3)
    assert importance(trials, SPACE, "max") is None
    assert importance(trials, SPACE, "max", min_trials=3) is not None
    # a trial without a finite value has not finished
    trials = synthetic(n=5)
    trials[0].score = None
    trials[1].score = float("nan")
    assert importance(trials, SPACE, "max", min_trials=4) is None
    assert importance([], SPACE, "max") is None


def test_nothing_to_tell_apart_gives_none():
    same_value = synthetic(n=8)
    for t in same_value:
        t.score = 1.0
    assert importance(same_value, SPACE, "max") is None
    same_config = synthetic(n=8)
    for t in same_config:
        t.config = {"lr": 1e-3, "gamma": 0.99, "num_epochs": 4}
    assert importance(same_config, SPACE, "max") is None


def test_a_key_that_never_changed_gets_zero():
    space = {**SPACE, "clip_param": Domain(uniform=(0.1, 0.3)), "vf": Domain(choice=[1.0])}
    trials = synthetic()
    for t in trials:
        t.config.update(clip_param=0.2, vf=1.0)
    for evaluator in EVALUATORS:
        out = importance(trials, space, "max", evaluator=evaluator)
        assert out["clip_param"] == 0.0
        assert out["vf"] == 0.0
        assert list(out)[0] == "lr"


def test_deterministic_whatever_the_order_of_the_trials():
    trials = synthetic()
    first = importances(trials, SPACE, "max")
    assert importances(trials, SPACE, "max") == first
    assert importances(list(reversed(trials)), SPACE, "max") == first


def test_mode_min_ranks_the_same_key_first():
    flipped = synthetic(sign=-1.0)  # lower is better now
    for evaluator in EVALUATORS:
        out = importance(flipped, SPACE, "min", evaluator=evaluator)
        assert list(out)[0] == "lr"
        assert out["lr"] > 0.6
    # PED-ANOVA looks at the best trials: the flipped values under min are the same study
    assert importance(flipped, SPACE, "min", evaluator="ped_anova") == importance(
        synthetic(), SPACE, "max", evaluator="ped_anova"
    )


def test_categorical_list_values_and_the_written_form_of_the_space():
    rng = random.Random(1)
    hiddens = [[64], [64, 64], [256, 256]]
    trials = []
    for _ in range(30):
        h = rng.choice(hiddens)
        trials.append(
            {
                "config": {"model.fcnet_hiddens": list(h), "lr": 10 ** rng.uniform(-5, -2)},
                "best_metric": 50.0 * len(h) + h[0] / 4 + rng.gauss(0, 2),
            }
        )
    space = {
        "model.fcnet_hiddens": {"choice": hiddens},
        "lr": {"loguniform": [1e-5, 1e-2]},
    }
    for evaluator in EVALUATORS:
        out = importance(trials, space, "max", evaluator=evaluator)
        assert list(out) == ["model.fcnet_hiddens", "lr"], out
        assert out["model.fcnet_hiddens"] > 0.6


def test_score_falls_back_to_best_metric_and_best_metric_can_be_chosen():
    trials = synthetic()
    for t in trials:
        t.best_metric, t.score = t.score, None  # the live store: no score yet
    assert list(importance(trials, SPACE, "max"))[0] == "lr"
    for t in trials:
        t.score = 0.0 if t.config["num_epochs"] > 5 else 1.0  # now num_epochs drives score
    assert list(importance(trials, SPACE, "max"))[0] == "num_epochs"
    assert list(importance(trials, SPACE, "max", value="best_metric"))[0] == "lr"


def test_unmappable_keys_and_unusable_trials_are_left_out():
    trials = synthetic()
    space = {**SPACE, "stage_key": None, "odd": {"nonsense": [1]}}
    for t in trials:
        t.config.update(stage_key="x", odd=1)
    out = importance(trials, space, "max")
    assert set(out) == set(SPACE)
    trials[0].config.pop("lr")  # no value for a key: the trial is skipped
    trials[1].config["lr"] = "fast"  # not a number for a numeric key: skipped too
    trials[2].config["lr"] = 0.5  # outside the bounds: they widen
    trials[3].config["gamma"] = 0.9  # not one of the choices: a category of its own
    assert list(importance(trials, SPACE, "max"))[0] == "lr"


@pytest.mark.parametrize("low", [0.1, 0.12])  # 0.12: Tune's multiples of q are off the grid
def test_quniform_on_and_off_its_grid(low):
    rng = random.Random(2)
    space = {"clip": Domain(quniform=(low, 0.4, 0.05)), "gamma": Domain(choice=[0.9, 0.99])}
    trials = []
    for _ in range(20):
        clip = round(rng.uniform(low, 0.4) / 0.05) * 0.05
        trials.append(
            {
                "config": {"clip": clip, "gamma": rng.choice([0.9, 0.99])},
                "score": 100 * clip + rng.gauss(0, 0.5),
            }
        )
    for evaluator in EVALUATORS:
        assert list(importance(trials, space, "max", evaluator=evaluator))[0] == "clip"


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="mode"):
        importance(synthetic(), SPACE, "maximize")
    with pytest.raises(ValueError, match="evaluators"):
        importance(synthetic(), SPACE, "max", evaluator="shap")
    with pytest.raises(ValueError, match="value"):
        importance(synthetic(), SPACE, "max", value="metric")


def test_200_trials_use_the_small_forest(monkeypatch):
    """The live importance runs in the driver after every finished trial: fANOVA gets a
    forest of FANOVA_TREES trees of depth FANOVA_DEPTH, not Optuna's default 64 x 64
    (about ten times the CPU; bench/importance_cost.py measures both), and still ranks
    the key that drives the metric first."""
    import importlib

    # the module itself: `from optuna import importance` gives optuna's lazy proxy until
    # something imports it, and a patch on the proxy never reaches the module
    optuna_importance = importlib.import_module("optuna.importance")

    built = []
    real = optuna_importance.FanovaImportanceEvaluator

    def spy(**kwargs):
        built.append(kwargs)
        return real(**kwargs)

    monkeypatch.setattr(optuna_importance, "FanovaImportanceEvaluator", spy)
    out = importances(synthetic(n=200), SPACE, "max")
    assert built == [{"n_trees": 16, "max_depth": 8, "seed": 0}]
    assert list(out["fanova"])[0] == "lr"
    assert list(out["ped_anova"])[0] == "lr"


def test_pure_no_ray():
    imported = set()
    for node in ast.walk(ast.parse(Path(tuner.importance.__file__).read_text())):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add((node.module or "").split(".")[0])
    allowed = {"__future__", "collections", "json", "logging", "math", "typing", "warnings"}
    assert imported <= allowed | {"optuna", "tuner"}, imported
