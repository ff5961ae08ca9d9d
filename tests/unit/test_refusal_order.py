"""A hostile spec is refused by our rule first: RLlib is never reached (to build the
config for the fit, or anything else) while a spec names code it may not."""

from __future__ import annotations

import pytest

import tuner.rllib
import tuner.validation._checks
from tuner.validation import Checks, check_source

DQN = "name: hostile\nalgorithm: DQN\nenv: CartPole-v1\n"
NODES = [{"CPU": 4.0}]  # a fit to check, as `tuner validate` and the API check one


def rllib_reached(*args, **kwargs):
    raise AssertionError("RLlib was reached with a spec whose code references stand")


@pytest.mark.parametrize(
    ("text", "loc"),
    [
        (
            'config: {replay_buffer_config: {type: "subprocess.Popen"}}\n',
            "config.replay_buffer_config.type",
        ),
        (
            "config: {replay_buffer_config: {type: subprocess.Popen, capacity: 1000}}\n"
            "search: {space: {lr: {choice: [0.001]}}}\n",
            "config.replay_buffer_config.type",
        ),
        (
            "search:\n  space:\n    replay_buffer_config:\n"
            "      choice: [{type: subprocess.Popen}]\n",
            "search.space.replay_buffer_config.type",
        ),
    ],
    ids=["config", "config-with-space", "space"],
)
@pytest.mark.parametrize(
    "checks",
    [
        Checks(allowed_modules=[], nodes=NODES),  # tuner validate
        Checks(allowed_modules=[], nodes=NODES, import_user_code=False, max_trials=1000),  # API
        Checks(allowed_modules=[], nodes=NODES, plan=True),  # tuner plan, the dry run
    ],
    ids=["cli", "api", "plan"],
)
def test_a_code_reference_is_refused_by_our_rule_before_rllib(text, loc, checks, monkeypatch):
    """`tuner validate` of such a DQN spec answered "(spec): cannot be checked:
    ValueError: When using the new EnvRunner API the replay buffer must be of type
    EpisodeReplayBuffer": the fit had built the config with RLlib first."""
    monkeypatch.setattr(tuner.rllib, "check_fits", rllib_reached)
    monkeypatch.setattr(tuner.validation._checks, "build_config", rllib_reached)
    checked = check_source(DQN + text, True, checks)
    assert [i.loc for i in checked.issues] == [loc]
    (issue,) = checked.issues
    assert "subprocess.Popen" in str(issue.value)
    assert "RLlib's replay buffers" in issue.msg or "class RLlib builds" in issue.msg


def test_the_real_fit_is_not_built_either():
    """The same spec through the real fit check: our refusal, not RLlib's words."""
    checked = check_source(
        DQN + 'config: {replay_buffer_config: {type: "subprocess.Popen"}}\n',
        True,
        Checks(allowed_modules=[], nodes=NODES),
    )
    assert [i.loc for i in checked.issues] == ["config.replay_buffer_config.type"]
    assert "EnvRunner" not in checked.issues[0].msg


def test_a_config_rllib_refuses_keeps_its_issue_when_the_fit_cannot_build_it():
    """RLlib refuses the config: its issue is the answer, not "(spec): cannot be
    checked" from the fit, which builds the same config and fails the same way."""
    checked = check_source(
        "name: x\nalgorithm: PPO\nenv: CartPole-v1\n"
        "config: {train_batch_size_per_learner: 64, minibatch_size: 128}\n",
        True,
        Checks(allowed_modules=[], nodes=NODES),
    )
    assert [i.loc for i in checked.issues] == ["config"]
    assert "RLlib rejects the config" in checked.issues[0].msg


def test_the_fit_is_still_checked_beside_other_problems():
    checked = check_source(
        DQN + "config: {lerning_rate: 0.1}\nresources: {num_env_runners: 8}\n",
        True,
        Checks(allowed_modules=[], nodes=[{"CPU": 2.0}]),
    )
    assert {i.loc for i in checked.issues} == {"config.lerning_rate", "resources.num_env_runners"}
