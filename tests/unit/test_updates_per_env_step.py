"""`updates_per_env_step`: DQN's default space searches the update ratio apart from the
batch, so a trial can pair batch 128 with one update per env step (rl-zoo3's tuned
Acrobot and LunarLander entries). Each trial trains RLlib's training_intensity = ratio x
batch, reports it as it ran, and a pasted best config reruns it; a spec may search the
key only where RLlib has a training_intensity, never beside it."""

from __future__ import annotations

import itertools

import pytest

from tuner.rllib import (
    TRAINABLES,
    apply_values,
    as_trial_runs,
    derived_settings,
    flat_defaults_apply,
    holds_update_ratio,
    rerun_config,
    sampled_values,
    update_ratio,
)
from tuner.rllib._fast_replay import debt_for
from tuner.search_spaces import UPDATES_PER_ENV_STEP
from tuner.spec import ExperimentSpec, SpecError, parse_spec, resolve_space
from tuner.sweep import trial_params
from tuner.validation import validate_spec

KEY = UPDATES_PER_ENV_STEP
BATCH = "train_batch_size_per_learner"


def spec_of(algorithm: str = "DQN", **patch) -> ExperimentSpec:
    env = "Pendulum-v1" if algorithm == "SAC" else "CartPole-v1"
    return parse_spec({"name": "updates", "algorithm": algorithm, "env": env, **patch})


def trained_per_env_step(params: dict, algorithm: str, flat: bool) -> float:
    """Samples trained per env step of a trial config as the trial runs it: RLlib's round
    robin, or the flat path's exact debt (_fast_replay.debt_for)."""
    params = {k: v for k, v in as_trial_runs(params, algorithm).items() if k[:6] != "_tuner"}
    cfg = TRAINABLES[algorithm].get_default_config().update_from_dict(params)
    if not flat:
        return update_ratio(cfg)
    debt = debt_for(cfg)
    return debt.train_weight / debt.steps_per_round * cfg.total_train_batch_size


@pytest.mark.parametrize("flat", ["1", "0"])
def test_every_sampled_pair_trains_ratio_times_batch_per_env_step(flat, monkeypatch):
    monkeypatch.setenv("TUNER_FAST_REPLAY", flat)
    spec = spec_of(stop={"timesteps_total": 100_000})
    space = resolve_space(spec)
    assert "training_intensity" not in space
    assert flat_defaults_apply(spec) == (flat == "1")
    pairs = itertools.product(space[KEY].args, space[BATCH].args)
    for updates, batch in pairs:
        config = apply_values(trial_params(spec), {KEY: updates, BATCH: batch})
        ran = as_trial_runs(config, "DQN")
        assert ran[KEY] == updates  # kept: the config RLlib reports names it
        assert ran["training_intensity"] == updates * batch
        trained = trained_per_env_step(config, "DQN", flat == "1")
        assert trained == pytest.approx(updates * batch, rel=1e-9), (updates, batch)


def test_the_space_pairs_batch_128_with_one_update_per_env_step():
    """rl-zoo3's Acrobot/LunarLander entry (batch 128, one update per env step) is one
    point of the resolved space at the anchors' budget: 128 samples per env step, where
    the old space (intensity at most the smallest batch) trained 32 in every trial."""
    space = resolve_space(spec_of(stop={"timesteps_total": 100_000}))
    assert 128 in space[BATCH].args
    assert 1.0 in space[KEY].args
    assert min(space[KEY].args) == 0.25


def test_the_trial_reports_the_intensity_it_ran_and_the_pasted_config_reruns_it():
    spec = spec_of(stop={"timesteps_total": 100_000})
    config = apply_values(trial_params(spec), {KEY: 1.0, BATCH: 128})
    sampled = sampled_values(config, [KEY, BATCH])
    assert sampled == {KEY: 1.0, BATCH: 128}
    derived, _ = derived_settings(config, spec)
    assert derived["training_intensity"] == 128.0
    full = rerun_config(spec, derived, sampled)
    assert KEY not in full  # the derived training_intensity stands for it
    assert full["training_intensity"] == 128.0
    # a row read back from the store has no Tune config to derive from: the same ratio
    read_back = rerun_config(spec, {}, sampled)
    assert KEY not in read_back
    assert read_back["training_intensity"] == 128.0
    pasted = spec_of(stop={"timesteps_total": 100_000}, config=full)
    validate_spec(pasted, allowed_modules=[], build_env=False)  # accepted as written
    assert KEY not in resolve_space(pasted)  # its training_intensity fixes the ratio
    again = trial_params(pasted)
    assert trained_per_env_step(again, "DQN", True) == trained_per_env_step(config, "DQN", True)


def test_a_spec_that_fixes_the_intensity_searches_no_ratio():
    spec = spec_of(config={"training_intensity": 8}, stop={"timesteps_total": 50_000})
    assert KEY not in resolve_space(spec)
    assert "training_intensity" not in resolve_space(spec)


def test_a_specs_own_space_may_search_it_for_sac():
    space = {KEY: {"choice": [0.5, 1]}, "actor_lr": {"loguniform": [1e-4, 1e-3]}}
    spec = spec_of("SAC", search={"method": "random", "space": space})
    validate_spec(spec, allowed_modules=[], build_env=False)
    assert not holds_update_ratio(spec_of("DQN", search={"space": {KEY: {"choice": [1]}}}))
    config = apply_values(trial_params(spec), {KEY: 0.5})
    batch = TRAINABLES["SAC"].get_default_config().train_batch_size_per_learner
    assert as_trial_runs(config, "SAC")["training_intensity"] == 0.5 * batch


def refusal(spec: ExperimentSpec) -> dict[str, str]:
    with pytest.raises(SpecError) as err:
        validate_spec(spec, allowed_modules=[], build_env=False)
    return {issue.loc: issue.msg for issue in err.value.issues}


@pytest.mark.parametrize(
    ("patch", "loc", "words"),
    [
        ({"config": {KEY: 1.0}}, f"config.{KEY}", "fix RLlib's training_intensity"),
        (
            {
                "search": {
                    "space": {KEY: {"choice": [0.5, 1]}, "training_intensity": {"choice": [8]}}
                }
            },
            f"search.space.{KEY}",
            "set the ratio one way",
        ),
        (
            {"config": {"training_intensity": 8}, "search": {"space": {KEY: {"choice": [1]}}}},
            f"search.space.{KEY}",
            "config.training_intensity sets too",
        ),
        ({"search": {"space": {KEY: {"choice": [0, 1]}}}}, f"search.space.{KEY}", "above 0"),
        ({"search": {"space": {KEY: {"uniform": [0, 1]}}}}, f"search.space.{KEY}", "above 0"),
    ],
)
def test_refused_where_it_cannot_set_the_ratio(patch, loc, words):
    got = refusal(spec_of(**patch))
    assert loc in got, got
    assert words in got[loc]


def test_refused_for_an_algorithm_without_an_update_ratio():
    spec = spec_of("PPO", search={"space": {KEY: {"choice": [1]}}})
    got = refusal(spec)
    assert "PPO has no update ratio" in got[f"search.space.{KEY}"]


def test_two_learners_train_the_ratio_of_their_whole_batch():
    spec = spec_of(resources={"num_learners": 2}, config={BATCH: 64})
    config = apply_values(trial_params(spec), {KEY: 0.5})
    assert as_trial_runs(config, "DQN")["training_intensity"] == 64.0  # 0.5 x (2 x 64)
    assert rerun_config(spec, {}, {KEY: 0.5})["training_intensity"] == 64.0


def test_a_training_loop_of_the_specs_own_keeps_the_key_as_sampled():
    spec = parse_spec(
        {
            "name": "own",
            "algorithm": "tuner_examples.trainables:reinforce",
            "metric": "episode_return_mean",
            "search": {"space": {KEY: {"choice": [1, 2]}}},
        }
    )
    assert rerun_config(spec, {}, {KEY: 2}) == {**spec.config, KEY: 2}


def test_a_warm_start_from_a_sweep_that_searched_the_intensity_reuses_its_ratios():
    """A DQN sweep from before the ratio was its own key searched training_intensity:
    each of its configs comes back with updates_per_env_step = intensity / batch, so
    nothing it learned is dropped, and Optuna is told the whole point."""
    from tests.stored import earlier_sweep
    from tuner.tracking import warm_start
    from tuner.views import TrialView

    budget = {"timesteps_total": 100_000}
    before = spec_of(stop=budget, search={"method": "optuna"})
    rows = [(32, 32, 300.0), (64, 32, 200.0), (128, 32, 100.0)]  # (batch, intensity, score)
    trials = [
        TrialView(
            trial_id=f"t{i}",
            status="TERMINATED",
            config={BATCH: batch, "training_intensity": intensity},
            seed=i,
            score=score,
        )
        for i, (batch, intensity, score) in enumerate(rows)
    ]
    earlier = earlier_sweep("old", before, trials)
    space = {BATCH: resolve_space(before)[BATCH], KEY: resolve_space(before)[KEY]}
    now = spec_of(
        stop=budget,
        search={
            "method": "optuna",
            "space": {k: d.model_dump(exclude_none=True) for k, d in space.items()},
            "warm_start": {"from": "old", "top_k": 3},
        },
    )
    out = warm_start(now, resolve_space(now), earlier)
    assert out.first == [{BATCH: 32, KEY: 1.0}, {BATCH: 64, KEY: 0.5}, {BATCH: 128, KEY: 0.25}]
    assert [score for _, score in out.known] == [300.0, 200.0, 100.0]
    assert not any("dropped" in w for w in out.warnings), out.warnings


@pytest.mark.parametrize("runners", [1, 3])
@pytest.mark.parametrize("flat", ["1", "0"])
def test_remote_env_runners_train_the_ratio_asked(runners, flat, monkeypatch):
    """RLlib's round robin counts the local env runner among the samplers (runners + 1),
    though with remote ones only they sample: the intensity is set so that the trial
    still trains ratio x batch samples per env step, on RLlib's path and the flat one."""
    monkeypatch.setenv("TUNER_FAST_REPLAY", flat)
    spec = spec_of(stop={"timesteps_total": 100_000}, resources={"num_env_runners": runners})
    for updates, batch in [(1.0, 128), (0.5, 64), (0.25, 32)]:
        config = apply_values(trial_params(spec), {KEY: updates, BATCH: batch})
        ran = as_trial_runs(config, "DQN")
        assert ran["num_env_runners"] == runners
        assert ran["training_intensity"] == pytest.approx(updates * batch * runners / (runners + 1))
        trained = trained_per_env_step(config, "DQN", flat == "1")
        assert trained == pytest.approx(updates * batch, rel=1e-9), (updates, batch)
        # the pasted best config (its derived intensity) trains the same
        derived, _ = derived_settings(config, spec)
        assert derived["training_intensity"] == ran["training_intensity"]
        assert rerun_config(spec, {}, {KEY: updates, BATCH: batch})["training_intensity"] == (
            pytest.approx(ran["training_intensity"])
        )


def test_a_warm_start_reads_an_intensity_with_remote_runners_as_the_ratio_it_trained():
    """An earlier sweep on 1 remote env runner that searched training_intensity 16 at
    batch 32 trained 32 samples per env step (RLlib's round robin): one update per env
    step, not a half."""
    from tests.stored import earlier_sweep
    from tuner.tracking import warm_start
    from tuner.views import TrialView

    budget = {"timesteps_total": 100_000}
    before = spec_of(stop=budget, search={"method": "optuna"}, resources={"num_env_runners": 1})
    trial = TrialView(
        trial_id="t0",
        status="TERMINATED",
        config={BATCH: 32, "training_intensity": 16},
        seed=0,
        score=1.0,
    )
    earlier = earlier_sweep("old", before, [trial])
    space = {BATCH: resolve_space(before)[BATCH], KEY: resolve_space(before)[KEY]}
    now = spec_of(
        stop=budget,
        resources={"num_env_runners": 1},
        search={
            "method": "optuna",
            "space": {k: d.model_dump(exclude_none=True) for k, d in space.items()},
            "warm_start": {"from": "old", "top_k": 1},
        },
    )
    out = warm_start(now, resolve_space(now), earlier)
    assert out.first == [{BATCH: 32, KEY: 1.0}]
