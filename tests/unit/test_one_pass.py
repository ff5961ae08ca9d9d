"""One pass of `tuner validate` says every problem it can, each unknown name with the
closest known one: the spec's fields, RLlib's settings, the algorithm and the env id,
also where the schema fails, and without building anything of a spec that names code
it may not."""

from __future__ import annotations

import gymnasium
import pytest

import tuner.rllib
import tuner.validation._checks
from tuner.spec import did_you_mean
from tuner.validation import Checks, check_source

NODES = [{"CPU": 4.0}]


def env_id_issues(env):
    from tuner.validation._issues import env_id_issues as issues

    return issues(env)


def cli_checks() -> Checks:
    """What `tuner validate` checks (the fit against this machine)."""
    return Checks(allowed_modules=[], nodes=NODES)


def by_loc(text: str, checks: Checks | None = None) -> dict[str, str]:
    checked = check_source(text, True, checks or cli_checks())
    return {i.loc: i.msg for i in checked.issues}


def nothing_built(monkeypatch) -> None:
    """RLlib's config, the fit and the env must not be built in this pass."""

    def built(*args, **kwargs):
        raise AssertionError("built while the spec was refused")

    monkeypatch.setattr(tuner.validation._checks, "build_config", built)
    monkeypatch.setattr(tuner.validation._checks, "check_env", built)
    monkeypatch.setattr(tuner.rllib, "check_fits", built)
    monkeypatch.setattr(gymnasium, "make", built)


def test_a_spec_field_an_rllib_setting_and_the_env_id_at_once(monkeypatch):
    """Took three rounds of `tuner validate`: the schema's problem hid the others."""
    nothing_built(monkeypatch)
    got = by_loc(
        "name: typos\nalgorithm: PPO\nenv: CartPol-v1\nsearch: {num_sample: 4}\n"
        "config: {lerning_rate: 0.001, num_epoch: 4}\n"
    )
    assert set(got) == {"search.num_sample", "config.lerning_rate", "config.num_epoch", "env"}
    assert got["search.num_sample"].endswith("did you mean `num_samples`?")
    assert got["config.num_epoch"].endswith("did you mean `num_epochs`?")
    assert got["config.lerning_rate"].startswith("unknown RLlib PPO setting")
    assert got["env"] == "not a registered gymnasium id; did you mean `CartPole-v1`?"


def test_a_misspelt_algorithm_is_named_beside_the_env():
    got = by_loc("name: typos\nalgorithm: Doubel_DQN\nenv: CartPol-v1\n")
    assert set(got) == {"algorithm", "env"}
    assert got["algorithm"].endswith("did you mean `Double_DQN`?")
    assert "did you mean `CartPole-v1`?" in got["env"]


def test_an_algorithm_in_another_case_is_named():
    got = by_loc("name: typos\nalgorithm: ppo\nenv: CartPole-v1\n")
    assert got["algorithm"].endswith("did you mean `PPO`?")


def test_a_valid_spec_gets_its_config_and_env_problems_together(monkeypatch):
    """The schema passes: RLlib's keys and the env id are checked in the same pass, before
    RLlib builds anything."""
    nothing_built(monkeypatch)
    got = by_loc("name: typos\nalgorithm: PPO\nenv: CartPol-v1\nconfig: {lerning_rate: 0.1}\n")
    assert set(got) == {"config.lerning_rate", "env"}


def test_a_code_reference_is_reported_with_the_rest_and_nothing_is_built(monkeypatch):
    nothing_built(monkeypatch)
    got = by_loc(
        "name: typos\nalgorithm: DQN\nenv: CartPol-v1\n"
        "config: {replay_buffer_config: {type: subprocess.Popen}, lerning_rate: 0.1}\n"
    )
    assert set(got) == {"config.replay_buffer_config.type", "config.lerning_rate", "env"}


def test_the_api_worker_reports_them_at_once_too(monkeypatch):
    nothing_built(monkeypatch)
    got = by_loc(
        "name: typos\nalgorithm: PPO\nenv: CartPol-v1\nsearch: {num_sample: 4}\n",
        Checks(allowed_modules=[], import_user_code=False, max_trials=1000),
    )
    assert set(got) == {"search.num_sample", "env"}


def test_an_env_the_schema_refuses_is_not_reported_twice():
    got = by_loc("name: typos\nalgorithm: PPO\nenv: subprocess.Popen\nsearch: {num_sample: 4}\n")
    assert set(got) == {"env", "search.num_sample"}
    assert "dotted env name" in got["env"]


@pytest.mark.parametrize("env", ["CartPole-v1", "CartPole", "Pendulum-v1", "LunarLander-v3"])
def test_registered_ids_pass(env):
    assert env_id_issues(env) == []


def test_ids_gymnasium_does_not_know():
    (issue,) = env_id_issues("NoSuchEnv-v9")
    assert (issue.loc, issue.value) == ("env", "NoSuchEnv-v9")
    assert issue.msg == "not a registered gymnasium id"
    assert "did you mean `CartPole-v1`?" in env_id_issues("cartpole-v1")[0].msg
    assert "did you mean `CartPole-v1`?" in env_id_issues("CartPole-v9")[0].msg


def test_import_paths_are_left_to_the_envs_build():
    assert env_id_issues("tests.envs:LineEnv") == []
    assert env_id_issues(None) == []
    assert env_id_issues(3) == []


def test_did_you_mean_prefers_the_same_name_in_another_case():
    assert did_you_mean("ppo", ["APPO", "PPO"]) == "; did you mean `PPO`?"
    assert did_you_mean("num_epoch", ["num_epochs", "lr"]) == "; did you mean `num_epochs`?"
    assert did_you_mean("zzz", ["num_epochs", "lr"]) == ""
