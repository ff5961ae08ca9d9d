"""The examples a plain `make run` cannot run say what they need (GET /examples `needs`),
and a service that allows no module says how to allow the one a spec names."""

from __future__ import annotations

from pathlib import Path

import pytest

from tuner.api._service import examples
from tuner.validation import Checks, check_source

EXAMPLES = Path(__file__).resolve().parents[2] / "experiments"
CODE = {
    "callbacks-cartpole",
    "custom-module-cartpole",
    "lstm-stateless-cartpole",
    "multiagent-cartpole",
    "own-buffer-dqn",
    "reinforce-cartpole",
}


def test_each_example_names_what_it_needs():
    needs = {e.name: e.needs for e in examples()}
    assert {name for name, need in needs.items() if need} == CODE | {"cartpole-ppo-warm-start"}
    for name in CODE:
        assert needs[name] == ["TUNER_ALLOWED_MODULES=tuner_examples"], name
    assert needs["cartpole-ppo-warm-start"] == [
        "an earlier sweep named cartpole-ppo-default-space (search.warm_start)"
    ]


@pytest.mark.parametrize("name", sorted(CODE))
def test_the_refusal_without_allowed_modules_says_how_to_allow_one(name):
    text = (EXAMPLES / f"{name}.yaml").read_text()
    checks = Checks(allowed_modules=[], check_fit=False, build_env=False, import_user_code=False)
    checked = check_source(text, True, checks)
    msgs = [issue.msg for issue in checked.issues]
    assert msgs, msgs
    assert all(
        "this service imports no user code (set TUNER_ALLOWED_MODULES=tuner_examples;" in m
        for m in msgs
    ), msgs
    assert not any("no module" in m for m in msgs)
