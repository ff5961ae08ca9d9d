"""Performance defaults change how fast a trial runs, never what it learns per sample:
for every algorithm and preset, the train batch size and the update ratio (samples
trained per env step sampled, in RLlib's own round-robin formula) are those RLlib's own
defaults give."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from tuner import algorithms as registry
from tuner.rllib import (
    HOLD_RATIO_KEY,
    TRAINABLES,
    apply_values,
    as_trial_runs,
    build_config,
    derived_settings,
    flat_defaults_apply,
    holds_update_ratio,
    update_ratio,
    vector_defaults_apply,
)
from tuner.rllib._fast_replay import debt_for
from tuner.rllib._update_ratio import MIN_STEPS_PER_ENV, hold_update_ratio, num_envs_of
from tuner.spec import ALGORITHMS, PRESETS, parse_spec
from tuner.sweep import trial_params

# every algorithm and preset whose trials sample in rounds on either replay path (DQN and
# its presets); SAC samples in rounds on the flat path only (its test below)
OFF_POLICY = [
    a
    for a in ALGORITHMS + PRESETS
    if registry.get(a).performance_defaults.get("rollout_fragment_length")
]


def spec_of(algorithm: str, **patch):
    env = "Pendulum-v1" if registry.base_algorithm(algorithm) == "SAC" else "CartPole-v1"
    return parse_spec({"name": "ratio", "algorithm": algorithm, "env": env, **patch})


def as_run(spec, overrides: dict) -> tuple:
    """(update ratio, train batch) of a trial: the param dict as Tune hands it to the
    trial (sampled values in), then the trial's own hold_update_ratio, then RLlib."""
    params = {**trial_params(spec), **overrides}
    params = hold_update_ratio(params, spec.algorithm)
    params = {k: v for k, v in params.items() if not k.startswith("_tuner")}
    cfg = TRAINABLES[spec.base_algorithm].get_default_config().update_from_dict(params)
    return update_ratio(cfg), cfg.total_train_batch_size, cfg.get_rollout_fragment_length()


def rllib_default(spec, overrides: dict) -> tuple:
    """The same with RLlib's own rollout_fragment_length ("auto") and no intensity."""
    cfg = build_config(spec)
    cfg.update_from_dict(overrides)
    cfg.env_runners(rollout_fragment_length="auto")
    return update_ratio(cfg), cfg.total_train_batch_size


@pytest.mark.parametrize("algorithm", OFF_POLICY)
def test_every_off_policy_preset_keeps_rllibs_update_ratio_and_batch(algorithm):
    assert registry.get(algorithm).performance_defaults["rollout_fragment_length"] > 1
    for batch, runners, envs in itertools.product([32, 256], [0, 1], [1, 4]):
        spec = spec_of(
            algorithm,
            resources={"num_env_runners": runners, "num_envs_per_env_runner": envs},
        )
        assert holds_update_ratio(spec)
        sampled = {"_train_batch_size_per_learner": batch}  # as the default space samples it
        ratio, train_batch, fragment = as_run(spec, sampled)
        want_ratio, want_batch = rllib_default(spec, {"train_batch_size_per_learner": batch})
        assert train_batch == want_batch == batch
        assert ratio == pytest.approx(want_ratio, rel=1e-9), (batch, runners, envs)
        assert fragment >= 32  # what makes it fast: 32+ env steps per sample round


def test_sac_on_the_flat_path_holds_rllibs_ratio_in_rounds_of_8():
    """SAC's flat_replay_defaults: rounds of 8 env steps and 8 updates, RLlib's own ratio
    (one update of the train batch per env step), one env; off the flat path (a spec's own
    connector here) RLlib's own fragment, nothing held."""
    flat = registry.get("SAC").flat_replay_defaults
    assert flat == {"rollout_fragment_length": 8}
    for batch, runners in itertools.product([64, 256], [0, 1]):
        spec = spec_of("SAC", resources={"num_env_runners": runners})
        assert flat_defaults_apply(spec)
        assert holds_update_ratio(spec)
        assert num_envs_of(spec) == 1
        ratio, train_batch, fragment = as_run_flat(spec, {"_train_batch_size_per_learner": batch})
        want_ratio, want_batch = rllib_default_one_env(
            spec, {"train_batch_size_per_learner": batch}
        )
        assert train_batch == want_batch == batch
        assert ratio == pytest.approx(want_ratio, rel=1e-9) == batch, (batch, runners)
        assert fragment == 8
    own = spec_of("SAC", normalize_observations=True)
    assert not flat_defaults_apply(own)
    assert not holds_update_ratio(own)
    assert HOLD_RATIO_KEY not in trial_params(own)


@pytest.mark.parametrize(
    "patch",
    [
        {"config": {"training_intensity": 4}},
        {"config": {"rollout_fragment_length": 4}},
        {"search": {"space": {"rollout_fragment_length": {"choice": [1, 4]}}}},
    ],
)
def test_a_spec_that_sets_the_ratio_itself_gets_exactly_what_it_set(patch):
    spec = spec_of("DQN", **patch)
    assert not holds_update_ratio(spec)
    assert HOLD_RATIO_KEY not in trial_params(spec)


def test_the_rest_have_no_ratio_to_hold():
    dqn = {a for a in ALGORITHMS + PRESETS if registry.base_algorithm(a) == "DQN"}
    assert set(OFF_POLICY) == dqn
    for algorithm in ("PPO", "APPO", "IMPALA"):
        spec = spec_of(algorithm)
        assert not holds_update_ratio(spec)
        assert HOLD_RATIO_KEY not in trial_params(spec)
        assert (
            trial_params(spec)["rollout_fragment_length"]
            == build_config(spec).rollout_fragment_length
        )  # RLlib's own


def as_run_flat(spec, overrides: dict) -> tuple:
    """as_run for a trial on the flat replay path, whose updates follow the env steps
    really sampled at the config's exact rate (_fast_replay.debt_for)."""
    params = hold_update_ratio({**trial_params(spec), **overrides}, spec.algorithm)
    params = {k: v for k, v in params.items() if not k.startswith("_tuner")}
    cfg = TRAINABLES[spec.base_algorithm].get_default_config().update_from_dict(params)
    debt = debt_for(cfg)
    ratio = debt.train_weight / debt.steps_per_round * cfg.total_train_batch_size
    return ratio, cfg.total_train_batch_size, cfg.get_rollout_fragment_length()


def rllib_default_one_env(spec, overrides: dict) -> tuple:
    """RLlib's own ratio for the spec as written (auto fragment, no intensity, its own
    env count: 1 when it sets none)."""
    cfg = build_config(spec)
    cfg.update_from_dict(overrides)
    cfg.env_runners(
        rollout_fragment_length="auto",
        num_envs_per_env_runner=spec.resources.num_envs_per_env_runner or 1,
    )
    return update_ratio(cfg), cfg.total_train_batch_size


@pytest.mark.parametrize("algorithm", OFF_POLICY)
def test_vectorised_flat_defaults_keep_the_ratio_of_the_specs_own_env_count(algorithm):
    flat = registry.get(algorithm).flat_replay_defaults
    assert flat["num_envs_per_env_runner"] > 1
    for batch, runners in itertools.product([32, 256], [0, 1]):
        spec = spec_of(algorithm, resources={"num_env_runners": runners})
        assert flat_defaults_apply(spec)
        assert holds_update_ratio(spec)
        assert num_envs_of(spec) == flat["num_envs_per_env_runner"]
        params = {**trial_params(spec), "_train_batch_size_per_learner": batch}
        assert params["num_envs_per_env_runner"] == flat["num_envs_per_env_runner"]
        ratio, train_batch, fragment = as_run_flat(spec, {"_train_batch_size_per_learner": batch})
        want_ratio, want_batch = rllib_default_one_env(
            spec, {"train_batch_size_per_learner": batch}
        )
        assert train_batch == want_batch == batch
        assert ratio == pytest.approx(want_ratio, rel=1e-9), (batch, runners)
        assert fragment == flat["rollout_fragment_length"]  # reported = run (no rounding)
        assert fragment * num_envs_of(spec) >= 24  # 24+ env steps per sample round


@pytest.mark.parametrize(
    "patch, why",
    [
        ({"resources": {"num_envs_per_env_runner": 1}}, "the spec's own env count"),
        ({"config": {"rollout_fragment_length": 1}}, "the spec's own fragment"),
        ({"search": {"space": {"rollout_fragment_length": {"choice": [1, 4]}}}}, "searched"),
        ({"env": "FrozenLake-v1"}, "Discrete observations: RLlib's replay path"),
        ({"env_config": {"sutton_barto_reward": True}}, "env_config: not made here"),
        ({"wrappers": "atari", "env": "ALE/Pong-v5"}, "image frames"),
        (
            {"config": {"replay_buffer_config": {"type": "MultiAgentEpisodeReplayBuffer"}}},
            "another buffer",
        ),
        ({"config": {"store_buffer_in_checkpoints": True}}, "buffer in checkpoints"),
        ({"config": {"batch_mode": "complete_episodes"}}, "rounds of whole episodes"),
        ({"config": {"add_default_connectors_to_learner_pipeline": False}}, "own connectors"),
        ({"model": {"use_lstm": True}}, "a recurrent module"),
        (
            {"search": {"space": {"replay_buffer_config": {"choice": [{"capacity": 10}]}}}},
            "a searched buffer",
        ),
        ({"search": {"space": {"env_config.x": {"choice": [1, 2]}}}}, "a searched env_config"),
    ],
)
def test_flat_defaults_only_where_the_flat_path_runs_and_the_spec_leaves_them(patch, why):
    spec = spec_of("DQN", **patch)
    assert not flat_defaults_apply(spec), why
    assert num_envs_of(spec) == (spec.resources.num_envs_per_env_runner or 1)
    assert trial_params(spec)["num_envs_per_env_runner"] == num_envs_of(spec)


def test_a_spec_setting_the_intensity_keeps_it_with_the_vectorised_defaults():
    spec = spec_of("DQN", config={"training_intensity": 8, "train_batch_size_per_learner": 32})
    assert flat_defaults_apply(spec)
    assert not holds_update_ratio(spec)
    ratio, batch, fragment = as_run_flat(spec, {})
    assert (ratio, batch) == (pytest.approx(8), 32)


def test_the_switch_that_turns_the_flat_path_off_turns_its_defaults_off(monkeypatch):
    monkeypatch.setenv("TUNER_FAST_REPLAY", "0")
    spec = spec_of("DQN")
    assert not flat_defaults_apply(spec)
    assert trial_params(spec)["num_envs_per_env_runner"] == 1
    assert trial_params(spec)["rollout_fragment_length"] == 32  # the 1-env default


def test_evaluation_keeps_the_specs_own_env_count():
    spec = spec_of("DQN", evaluation={"interval": 1, "duration": 10})
    assert flat_defaults_apply(spec)
    cfg = build_config(spec)
    assert cfg.num_envs_per_env_runner == 8
    assert cfg.get_evaluation_config_object().num_envs_per_env_runner == 1
    own = spec_of("DQN", evaluation={"interval": 1}, resources={"num_envs_per_env_runner": 4})
    assert build_config(own).get_evaluation_config_object().num_envs_per_env_runner == 4


# -- PPO: vectorised envs, the same batch, minibatches and epochs ---------------------------

PPO_ENVS = registry.get("PPO").performance_defaults["num_envs_per_env_runner"]


def ppo_as_run(spec, overrides: dict | None = None) -> Any:
    """The RLlib config a PPO trial runs: its param dict as Tune hands it over (sampled
    values in), then the trial's own as_trial_runs."""
    params = as_trial_runs({**trial_params(spec), **(overrides or {})}, "PPO")
    params = {k: v for k, v in params.items() if not k.startswith("_tuner")}
    return TRAINABLES["PPO"].get_default_config().update_from_dict(params)


@pytest.mark.parametrize(
    "batch, runners, envs",
    [
        (2048, 0, PPO_ENVS),  # SB3's PPO batch: 8 envs of 256 steps
        (4000, 0, PPO_ENVS),  # RLlib's default batch
        (4096, 1, PPO_ENVS),
        (256, 0, PPO_ENVS),  # rl-zoo3's CartPole rollout: 8 envs of 32 steps
        (200, 0, 6),  # fewer envs, each sampling 32+ steps of a batch
        (256, 3, 2),
        (63, 0, 1),  # a tiny batch stays on one env
        (32, 0, 1),
    ],
)
def test_ppo_vectorised_defaults_keep_the_specs_batch_minibatch_and_epochs(batch, runners, envs):
    """An on-policy update is num_epochs passes over one train batch in minibatches: all
    three stay the spec's; only how the batch is sampled changes (up to 8 envs side by
    side, each sampling at least 32 steps of a batch; RLlib's fragment the batch over
    the envs), and one sample round still fills it."""
    assert PPO_ENVS > 1
    config = {"train_batch_size_per_learner": batch, "minibatch_size": 32, "num_epochs": 3}
    spec = spec_of("PPO", config=config, resources={"num_env_runners": runners})
    assert vector_defaults_apply(spec)
    assert not flat_defaults_apply(spec)
    assert num_envs_of(spec) == envs
    cfg = ppo_as_run(spec)
    assert cfg.num_envs_per_env_runner == envs
    assert envs == 1 or cfg.get_rollout_fragment_length() >= MIN_STEPS_PER_ENV
    assert (cfg.total_train_batch_size, cfg.minibatch_size, cfg.num_epochs) == (batch, 32, 3)
    per_round = cfg.get_rollout_fragment_length() * envs * max(runners, 1)
    assert batch <= per_round < batch + envs * max(runners, 1)
    # and RLlib's own default with one env trains the very same batch
    one = ppo_as_run(spec_of("PPO", config=config, resources={"num_envs_per_env_runner": 1}))
    assert one.num_envs_per_env_runner == 1
    assert (one.total_train_batch_size, one.minibatch_size, one.num_epochs) == (batch, 32, 3)


def test_a_ppo_trial_takes_the_env_count_of_its_own_sampled_batch():
    space = {"train_batch_size_per_learner": {"choice": [48, 128, 4096]}}
    spec = spec_of("PPO", search={"method": "random", "space": space})
    assert vector_defaults_apply(spec)
    assert ppo_as_run(spec, {"_train_batch_size_per_learner": 48}).num_envs_per_env_runner == 1
    assert ppo_as_run(spec, {"_train_batch_size_per_learner": 128}).num_envs_per_env_runner == 4
    big = ppo_as_run(spec, {"_train_batch_size_per_learner": 4096})
    assert big.num_envs_per_env_runner == PPO_ENVS
    assert big.total_train_batch_size == 4096


@pytest.mark.parametrize(
    "patch, why",
    [
        ({"resources": {"num_envs_per_env_runner": 1}}, "the spec's own env count"),
        ({"resources": {"num_envs_per_env_runner": 4}}, "the spec's own env count"),
        ({"config": {"rollout_fragment_length": 200}}, "the spec's own fragment"),
        ({"search": {"space": {"rollout_fragment_length": {"choice": [100, 200]}}}}, "searched"),
        ({"config": {"batch_mode": "complete_episodes"}}, "rounds of whole episodes"),
        ({"model": {"use_lstm": True}}, "a recurrent module"),
        ({"search": {"space": {"model.use_lstm": {"choice": [True, False]}}}}, "searched LSTM"),
        ({"env_config": {"sutton_barto_reward": True}}, "env_config: not made here"),
        ({"search": {"space": {"env_config.x": {"choice": [1, 2]}}}}, "a searched env_config"),
        ({"env": "FrozenLake-v1"}, "Discrete observations"),
        ({"wrappers": "atari", "env": "ALE/Pong-v5"}, "image frames, wrapped"),
    ],
)
def test_ppo_vectorised_defaults_only_where_the_spec_leaves_them(patch, why):
    spec = spec_of("PPO", **patch)
    assert not vector_defaults_apply(spec), why
    assert num_envs_of(spec) == (spec.resources.num_envs_per_env_runner or 1)
    assert trial_params(spec)["num_envs_per_env_runner"] == num_envs_of(spec)


def test_only_ppo_and_dqn_vectorise_by_default():
    for algorithm in ALGORITHMS + PRESETS:
        spec = spec_of(algorithm)
        base = registry.base_algorithm(algorithm)
        want = {"PPO": PPO_ENVS, "DQN": 8}.get(base, 1)  # PPO: RLlib's batch of 4000
        assert num_envs_of(spec) == want, algorithm
        assert trial_params(spec)["num_envs_per_env_runner"] == want, algorithm
        assert as_trial_runs(trial_params(spec), algorithm)["num_envs_per_env_runner"] == want


def test_ppo_evaluation_keeps_the_specs_own_env_count():
    spec = spec_of("PPO", evaluation={"interval": 1, "duration": 10})
    cfg = build_config(spec)
    assert cfg.num_envs_per_env_runner == PPO_ENVS
    assert cfg.get_evaluation_config_object().num_envs_per_env_runner == 1


# -- what a trial derives, reported so that a pasted best config reruns it as it ran -----


def paste(spec, config: dict, resources: dict, **patch):
    """The spec a user writes from a best trial: `full_config`'s derived settings under
    `config`, `resources` under `resources`."""
    own = {**spec.resources.model_dump(exclude_none=True), **resources}
    return spec_of(spec.algorithm, config={**spec.config, **config}, resources=own, **patch)


def test_the_held_ratio_is_reported_as_the_trial_ran_it():
    """A one-env DQN trial with n_step 3 sampled: RLlib's fragment is rounded to 33 and a
    training_intensity holds the ratio; both come back, and pasted they rerun the same
    update ratio, batch and fragment."""
    spec = spec_of("DQN", resources={"num_envs_per_env_runner": 1})
    sampled = {"n_step": 3, "_train_batch_size_per_learner": 64}
    config, resources = derived_settings({**trial_params(spec), **sampled}, spec)
    assert config["rollout_fragment_length"] == 33  # not the 32 of the fixed settings
    assert config["training_intensity"] == pytest.approx(64 / 3)
    assert resources == {}
    again = paste(spec, {**config, "n_step": 3, "train_batch_size_per_learner": 64}, resources)
    assert not holds_update_ratio(again)
    assert as_run(again, {}) == as_run(spec, sampled)


def test_the_flat_paths_ratio_and_env_count_are_reported_as_the_trial_ran_them():
    spec = spec_of("DQN")
    assert flat_defaults_apply(spec)
    config, resources = derived_settings(trial_params(spec), spec)
    assert resources == {"num_envs_per_env_runner": 8}
    assert set(config) == {"rollout_fragment_length", "training_intensity"}
    again = paste(spec, config, resources)
    assert num_envs_of(again) == 8
    assert not holds_update_ratio(again)
    assert as_run_flat(again, {}) == as_run_flat(spec, {})


def test_ppos_env_count_is_reported_and_pasted_reruns_it():
    spec = spec_of("PPO")
    config, resources = derived_settings(trial_params(spec), spec)
    assert (config, resources) == ({}, {"num_envs_per_env_runner": PPO_ENVS})
    assert ppo_as_run(paste(spec, config, resources)).num_envs_per_env_runner == PPO_ENVS
    # a sampled batch's own env count, as its trial ran it
    space = {"train_batch_size_per_learner": {"choice": [128, 4096]}}
    spec = spec_of("PPO", search={"method": "random", "space": space})
    params = {**trial_params(spec), "_train_batch_size_per_learner": 128}
    assert derived_settings(params, spec) == ({}, {"num_envs_per_env_runner": 4})


def test_nothing_is_derived_where_the_spec_set_it():
    spec = spec_of("DQN", config={"training_intensity": 4, "rollout_fragment_length": 8})
    assert derived_settings(trial_params(spec), spec) == ({}, {})
    spec = spec_of("PPO", resources={"num_envs_per_env_runner": 2})
    assert derived_settings(trial_params(spec), spec) == ({}, {})


def test_a_confirmation_trials_ratio_is_that_of_its_candidates_values():
    from tuner.rllib import CONFIRM_KEY

    spec = spec_of("DQN", resources={"num_envs_per_env_runner": 1})
    candidate = {"train_batch_size_per_learner": 128}
    params = {**trial_params(spec), CONFIRM_KEY: {"values": candidate, "seed": 7}}
    config, _ = derived_settings(params, spec)
    ran = hold_update_ratio(apply_values(trial_params(spec), candidate), "DQN")
    # RLlib's ratio at DQN's own 3-step returns (presets.yaml): its auto fragment is 3
    assert config["training_intensity"] == ran["training_intensity"] == pytest.approx(128 / 3)


def test_a_pasted_env_count_keeps_evaluation_on_the_specs_own_envs():
    """Pasted under `resources`, the env count is the spec's own, and evaluation would
    run on as many; the derived config pins evaluation to the env count it ran on."""
    spec = spec_of("PPO", evaluation={"interval": 1, "duration": 4})
    assert build_config(spec).get_evaluation_config_object().num_envs_per_env_runner == 1
    config, resources = derived_settings(trial_params(spec), spec)
    assert resources == {"num_envs_per_env_runner": PPO_ENVS}
    assert config == {"evaluation_config": {"num_envs_per_env_runner": 1}}
    again = build_config(paste(spec, config, resources, evaluation={"interval": 1, "duration": 4}))
    assert again.num_envs_per_env_runner == PPO_ENVS
    assert again.get_evaluation_config_object().num_envs_per_env_runner == 1


def test_a_custom_loop_derives_nothing():
    spec = parse_spec(
        {
            "name": "own",
            "algorithm": "tuner_examples.trainables:reinforce",
            "metric": "episode_return_mean",
            "config": {"num_envs_per_env_runner": 4},
        }
    )
    assert derived_settings({"num_envs_per_env_runner": 4}, spec) == ({}, {})
