"""What earlier versions pickled under tuner.trials (Tune states, RLlib checkpoints)
still unpickles after the move into tuner.rllib, tuner.tracking and tuner.sweep."""

from __future__ import annotations

import functools
import pickle

import pytest


def old_reference(module: str, name: str) -> bytes:
    """A pickle, protocol 0, of a global by its old module path."""
    return f"c{module}\n{name}\n.".encode()


@pytest.mark.parametrize(
    ("module", "name", "home"),
    [
        ("tuner.trials._algorithms", "TunerPPO", "tuner.rllib._trainables"),
        ("tuner.trials._algorithms", "map_agent", "tuner.rllib._multi_agent"),
        ("tuner.trials._sac_model", "TunerSACConfig", "tuner.rllib._sac_model"),
        ("tuner.trials._mlflow", "MLflowTracker", "tuner.tracking._mlflow_tracker"),
        ("tuner.trials._store_callback", "StopRequested", "tuner.sweep._graceful"),
        ("tuner.trials._stoppers", "SweepStopper", "tuner.sweep._stoppers"),
        ("tuner.trials._pb2", "TunerPB2", "tuner.sweep._pb2"),
        ("tuner.trials._interrupt", "InterruptWatch", "tuner.sweep._interrupt"),
    ],
)
def test_an_old_reference_unpickles_to_the_class_where_it_lives_now(module, name, home):
    import importlib

    value = pickle.loads(old_reference(module, name))
    assert value is getattr(importlib.import_module(home), name)
    assert value.__module__ == home


def test_an_old_multi_agent_mapping_still_maps():
    from tuner.rllib._multi_agent import map_agent

    old = pickle.loads(old_reference("tuner.trials._algorithms", "map_agent"))
    mapping = functools.partial(old, (("a0", "p0"),), "p1")
    assert old is map_agent
    assert mapping("a0") == "p0"
    assert mapping("a9") == "p1"


def test_a_name_that_moved_nowhere_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no_such_thing"):
        pickle.loads(old_reference("tuner.trials._algorithms", "no_such_thing"))
