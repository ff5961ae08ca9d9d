"""A local Ray whose node times out registering (a busy host) is started again; any
other failure of the start is raised at once. Either way the error names the cause."""

from __future__ import annotations

import pytest
import ray

from tuner.launcher import _local

TIMED_OUT = Exception(
    "The current node timed out during startup. This could happen because some of the "
    "raylet failed to startup or the GCS has become overloaded."
)


def starts(monkeypatch, outcomes):
    """ray.init replaced by one that fails or returns by `outcomes`, counting its calls."""
    calls = []

    def init(**kwargs):
        calls.append(kwargs)
        outcome = outcomes[len(calls) - 1]
        if outcome is not None:
            raise outcome

    monkeypatch.setattr(ray, "init", init)
    monkeypatch.setattr(ray, "shutdown", lambda: None)
    return calls


def test_a_start_that_timed_out_is_tried_again(monkeypatch, caplog):
    calls = starts(monkeypatch, [TIMED_OUT, None])
    _local._start_local_ray(2)
    assert len(calls) == 2
    assert calls[1]["address"] == "local"
    assert calls[1]["num_cpus"] == 2
    assert "starting it again (2 of 3)" in caplog.text


def test_it_gives_up_after_the_last_try_naming_the_cause(monkeypatch):
    calls = starts(monkeypatch, [TIMED_OUT] * _local.LOCAL_STARTS)
    with pytest.raises(_local.RayStartError, match="timed out registering, 3 times") as got:
        _local._start_local_ray(None)
    assert len(calls) == _local.LOCAL_STARTS
    assert "The current node timed out during startup" in str(got.value)


def test_another_failure_is_raised_at_once(monkeypatch):
    calls = starts(monkeypatch, [ValueError("bad num_cpus"), None])
    with pytest.raises(_local.RayStartError, match="did not start: ValueError: bad num_cpus"):
        _local._start_local_ray(2)
    assert len(calls) == 1
