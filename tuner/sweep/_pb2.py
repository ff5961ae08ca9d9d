"""PB2 as the spec's `scheduler: {type: pb2}` runs it. A module of its own: Ray's PB2
imports scikit-learn, which nothing else of a sweep needs."""

from __future__ import annotations

import copy

from ray.tune.experiment import Trial
from ray.tune.schedulers.pb2 import PB2


class TunerPB2(PB2):
    """Ray's PB2, keeping every setting it does not perturb exactly as it was.

    Ray's PB2 builds the new config by flattening the cloned trial's whole config and
    unflattening it again, which drops every empty dict of an RLlib config
    (`env_config: {}`, `optimizer: {}`, ...) and rewrites nested keys. Here the cloned
    config is copied whole and only the bounded keys are laid over it."""

    def _get_new_config(self, trial: Trial, trial_to_clone: Trial) -> tuple[dict, dict]:
        new_config, operations = super()._get_new_config(trial, trial_to_clone)
        out = copy.deepcopy(trial_to_clone.config)
        for key in self._hyperparam_bounds:
            out[key] = new_config[key]
        return out, operations
