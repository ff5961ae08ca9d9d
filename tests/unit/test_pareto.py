"""Several objectives without Ray: the spec's rules, Pareto dominance and the front, the
confirmation's candidates from it, and how the CLI prints it."""

from __future__ import annotations

import io

import pandas as pd
import pytest
from rich.console import Console

from tuner.cli._app import print_pareto
from tuner.results import dominates, pareto_front
from tuner.spec import SpecError, parse_spec
from tuner.sweep._confirm import pick_candidates
from tuner.sweep._pareto import confirmed_values, front, objective_values
from tuner.views import ConfirmedConfig, SweepSummary, TrialView

RETURN, TIME = "env_runners/episode_return_mean", "time_total_s"
TWO = [{"metric": RETURN, "mode": "max"}, {"metric": TIME, "mode": "min"}]
BASE = {"name": "mo", "algorithm": "PPO", "env": "CartPole-v1"}


def test_dominance_counts_each_objective_in_its_own_direction():
    modes = ["max", "min"]
    assert dominates([10, 1], [9, 2], modes)
    assert dominates([10, 1], [10, 2], modes)  # as good on one, better on the other
    assert not dominates([10, 1], [10, 1], modes)  # equal: neither beats the other
    assert not dominates([10, 2], [9, 1], modes)  # a trade-off
    points = [[10, 5], [8, 1], [9, 3], [7, 4], [10, 5]]
    # [7, 4] is beaten by [9, 3]; equal points both stay
    assert pareto_front(points, modes) == [0, 1, 2, 4]


def test_objectives_set_metric_and_mode_from_the_first():
    spec = parse_spec({**BASE, "objectives": TWO})
    assert (spec.metric, spec.mode) == (RETURN, "max")
    assert [o.metric for o in spec.objective_list] == [RETURN, TIME]
    assert parse_spec(spec.model_dump(mode="json")) == spec  # stored and read back
    one = parse_spec(BASE)
    assert [(o.metric, o.mode) for o in one.objective_list] == [(RETURN, "max")]


@pytest.mark.parametrize(
    ("patch", "field", "value"),
    [
        ({"metric": TIME}, "metric", TIME),
        ({"mode": "min"}, "mode", "min"),
        (
            {"objectives": [TWO[0], {"metric": RETURN, "mode": "min"}]},
            "objectives.1.metric",
            RETURN,
        ),
        (
            {"objectives": [TWO[0], {"metric": "evaluation/" + RETURN, "mode": "max"}]},
            "objectives.1.metric",
            "evaluation/" + RETURN,
        ),
        ({"objectives": [TWO[0]]}, "objectives", RETURN),
        ({"objectives": [TWO[0], {"metric": "a b", "mode": "min"}]}, "objectives.1.metric", "a b"),
    ],
)
def test_bad_objectives_name_the_field_and_value(patch, field, value):
    with pytest.raises(SpecError) as err:
        parse_spec({**BASE, "objectives": TWO, **patch})
    text = str(err.value)
    assert text.startswith(field + ":") or f"; {field}:" in text, text
    assert value in text


def _trial(tid, ret, time, stage="search", config=None):
    values = {RETURN: ret, TIME: time}
    return TrialView(
        trial_id=tid,
        status="TERMINATED",
        stage=stage,
        config=config or {"lr": tid},
        score=ret,
        values=values,
    )


def test_the_front_is_ordered_by_the_first_objective_and_skips_incomplete_trials():
    spec = parse_spec({**BASE, "objectives": TWO})
    trials = [
        _trial("a", 10.0, 5.0),
        _trial("b", 8.0, 1.0),
        _trial("c", 7.0, 4.0),  # beaten by b
        _trial("d", 12.0, 9.0),
        _trial("e", 99.0, None),  # no time: not ranked
        _trial("f", 50.0, 0.1, stage="confirm"),  # a confirmation trial: not the search's
    ]
    members = front(spec, trials)
    assert [m.trial_id for m in members] == ["d", "a", "b"]
    assert members[1].values == {RETURN: 10.0, TIME: 5.0}
    assert front(parse_spec(BASE), trials) == []  # one metric: no front


def test_objective_values_take_each_history_under_scope():
    spec = parse_spec({**BASE, "objectives": TWO, "scope": "all"})
    history = pd.DataFrame({RETURN: [1.0, None, 3.0, 2.0], TIME: [4.0, 3.0, 5.0, 6.0]})
    assert objective_values(spec, history) == {RETURN: 3.0, TIME: 3.0}  # each its own peak
    last = parse_spec({**BASE, "objectives": TWO, "scope": "last"})
    assert objective_values(last, history) == {RETURN: 2.0, TIME: 6.0}
    assert objective_values(last, history[[RETURN]]) == {RETURN: 2.0, TIME: None}
    assert objective_values(parse_spec(BASE), history) is None


def test_confirm_takes_the_front_members_in_order_and_reports_their_values():
    spec = parse_spec({**BASE, "objectives": TWO, "confirm": {"top_k": 2, "seeds": 2}})
    trials = [_trial("a", 10.0, 5.0), _trial("b", 8.0, 1.0), _trial("c", 9.5, 6.0)]
    summary = SweepSummary(name="mo", status="SUCCEEDED", metric=RETURN, mode="max", trials=trials)
    summary.pareto = front(spec, trials)
    # c has the second best return but is beaten by a: the front's b is confirmed instead
    assert [t.trial_id for t in pick_candidates(spec, summary)] == ["a", "b"]
    runs = [_trial("a1", 9.0, 4.0, "confirm"), _trial("a2", 11.0, 6.0, "confirm")]
    confirmed = [
        ConfirmedConfig(
            trial_id="a", config={}, seeds=[1, 2], scores=[9, 11], mean=10.0, trials=["a1", "a2"]
        )
    ]
    confirmed_values(spec, confirmed, runs, summary.pareto)
    assert confirmed[0].values == {RETURN: 10.0, TIME: 5.0}
    assert summary.pareto[0].confirmed is confirmed[0]
    assert summary.pareto[1].confirmed is None


def test_the_cli_prints_the_front_whole_when_piped():
    spec = parse_spec({**BASE, "objectives": TWO})
    members = front(spec, [_trial("a", 10.0, 5.0), _trial("b", 8.0, 1.0)])
    buf = io.StringIO()
    print_pareto(Console(file=buf, width=60), [m.model_dump(mode="json") for m in members], "last")
    lines = buf.getvalue().splitlines()
    assert lines[0].startswith("Pareto front (2 trials, last of each objective")
    assert lines[1].split("\t") == ["trial id", RETURN, TIME, "confirmed (means)", "config"]
    assert lines[2].split("\t")[:4] == ["a", "10", "5", "-"]


def test_whole_number_histories_count(tmp_path):
    """Tune reads a whole-number column back from progress.csv as int64."""
    import numpy as np

    from tuner.results import scope_value

    assert scope_value(list(np.array([3, 5, 7], dtype=np.int64)), "last", "max") == 7.0
    spec = parse_spec({**BASE, "objectives": [TWO[0], {"metric": "steps", "mode": "min"}]})
    history = pd.DataFrame({RETURN: [1.0, 2.0], "steps": [100, 200]})
    assert history["steps"].dtype == np.int64
    assert objective_values(spec, history)["steps"] == 150.0  # last-5-avg


def test_every_objective_is_checked_as_the_metric_is():
    per_agent = {"metric": "env_runners/agent_episode_returns_mean/a", "mode": "max"}
    with pytest.raises(SpecError) as err:
        parse_spec({**BASE, "objectives": [TWO[0], per_agent]})
    assert str(err.value).startswith("objectives.1.metric: a per-agent metric needs")


def test_fronts_that_would_mislead_are_warned_about():
    from tuner.validation._issues import objective_warnings

    spec = parse_spec({**BASE, "objectives": TWO, "scheduler": {"type": "asha"}})
    said = " ".join(objective_warnings(spec))
    assert "time_total_s only grow" in said
    assert "'last-5-avg'" in said
    assert "scheduler asha stops trials early" in said
    assert objective_warnings(parse_spec({**BASE, "objectives": TWO, "scope": "last"})) == []
    assert objective_warnings(parse_spec(BASE)) == []


def test_a_metric_no_trial_reports_is_said():
    from tuner.sweep._pareto import missing_values

    spec = parse_spec({**BASE, "objectives": TWO})
    trials = [_trial("a", 10.0, None), _trial("b", 8.0, 1.0)]
    said = missing_values(spec, trials)
    assert said is not None
    assert "time_total_s in 1 of 2" in said
    assert missing_values(spec, [_trial("b", 8.0, 1.0)]) is None


def test_the_study_is_told_a_nan_objective_as_pruned_and_old_searchers_still_start():
    from optuna.trial import TrialState
    from ray import tune

    from tuner.sweep._tuner import TunerOptunaSearch

    search = TunerOptunaSearch(objectives=[(RETURN, "max"), (TIME, "min")])
    assert search.set_search_properties(RETURN, "max", {"lr": tune.uniform(0.1, 1.0)})
    assert search.metric == [RETURN, TIME]
    for tid, time in (("t1", float("nan")), ("t2", 2.0)):
        search.suggest(tid)
        search.on_trial_result(tid, {RETURN: 1.0, TIME: time, "training_iteration": 1})
        search.on_trial_complete(tid, {RETURN: 1.0, TIME: time})
    states = [t.state for t in search._ot_study.trials]
    assert states == [TrialState.PRUNED, TrialState.COMPLETE]
    old = TunerOptunaSearch()
    del old.tuner_objectives  # as a searcher pickled before objectives existed
    assert old.set_search_properties(RETURN, "max", {"lr": tune.uniform(0.1, 1.0)})
    assert old.metric == RETURN
