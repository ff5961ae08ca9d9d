"""Which sweeps reuse trial actors (Tune's reuse_actors): the RLlib trainables, which
build themselves again in place (reset_config), unless the spec says no; never a spec's
own training loop."""

from __future__ import annotations

import pytest

from tuner.rllib import TRAINABLES
from tuner.spec import SpecError, parse_spec
from tuner.sweep._tuner import reuses_actors


def _spec(**patch):
    return parse_spec({"name": "reuse", "algorithm": "PPO", "env": "CartPole-v1", **patch})


def test_rllib_sweeps_reuse_actors_unless_the_spec_says_no():
    assert reuses_actors(_spec())
    assert not reuses_actors(_spec(reuse_actors=False))


def test_an_own_training_loop_always_gets_fresh_actors():
    own = _spec(
        algorithm="tuner_examples.trainables:reinforce",
        env=None,
        metric="episode_return_mean",
        reuse_actors=True,
    )
    assert own.custom_algorithm
    assert not reuses_actors(own)


@pytest.mark.parametrize("algorithm", ["APPO", "IMPALA"])
def test_appo_and_impala_with_a_gpu_learner_in_the_trial_get_fresh_actors(algorithm):
    """RLlib's IMPALA Learner leaves its GPU loader threads running at shutdown."""
    gpu = {"num_gpus_per_learner": 0.5}
    assert not reuses_actors(_spec(algorithm=algorithm, resources=gpu))
    assert reuses_actors(_spec(algorithm=algorithm))
    assert reuses_actors(_spec(algorithm=algorithm, resources={**gpu, "num_learners": 1}))
    assert reuses_actors(_spec(resources=gpu))  # PPO's Learner has no such threads


@pytest.mark.parametrize("name", sorted(TRAINABLES))
def test_every_rllib_trainable_resets_in_place(name):
    """Tune reuses an actor only where reset_config returns True; Trainable's returns
    False (a new actor per trial), so each of ours must override it."""
    from ray.tune import Trainable

    assert TRAINABLES[name].reset_config is not Trainable.reset_config


def test_a_bad_value_names_the_field():
    with pytest.raises(SpecError) as e:
        _spec(reuse_actors="sometimes")
    assert "reuse_actors" in str(e.value)
    assert "sometimes" in str(e.value)
