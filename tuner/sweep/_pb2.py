"""PB2 as the spec's `scheduler: {type: pb2}` runs it. A module of its own: Ray's PB2
imports scikit-learn, which nothing else of a sweep needs."""

from __future__ import annotations

import copy
from collections.abc import Callable

from ray.tune.experiment import Trial
from ray.tune.schedulers.pb2 import PB2

from tuner.ray_internals import PB2ConfigHook, pb2_bounded_keys
from tuner.sweep._judged_on import JudgedOn


class TunerPB2(JudgedOn, PB2ConfigHook, PB2):
    """Ray's PB2, keeping every setting it does not perturb exactly as it was.

    Ray's PB2 builds the new config by flattening the cloned trial's whole config and
    unflattening it again, which drops every empty dict of an RLlib config
    (`env_config: {}`, `optimizer: {}`, ...) and rewrites nested keys. Here the cloned
    config is copied whole and only the bounded keys are laid over it."""

    def tuner_new_config(
        self,
        trial: Trial,
        trial_to_clone: Trial,
        tune_default: Callable[[Trial, Trial], tuple[dict, dict]],
    ) -> tuple[dict, dict]:
        """Tune's new config for `trial`, cloned from `trial_to_clone`: the clone's
        config with the bounded keys' new values laid over it."""
        new_config, operations = tune_default(trial, trial_to_clone)
        out = copy.deepcopy(trial_to_clone.config)
        for key in pb2_bounded_keys(self):
            out[key] = new_config[key]
        return out, operations
