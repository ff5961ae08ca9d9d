"""A CPU Learner's lean gradient step (tuner.ray_internals.lean_cpu_steps): real RLlib
trials train the same with it as with RLlib's own clip and apply_gradients, and a NaN
gradient still gets RLlib's handling (zeroed, the step taken)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import TINY_TRIALS
from tuner.rllib import trainable_for
from tuner.spec import parse_spec
from tuner.sweep import trial_params

pytestmark = pytest.mark.integration

SPECS = TINY_TRIALS
NORM = "gradients_default_optimizer_global_norm"  # RLlib's metric of the clip's norm
TARGET_UPDATES = "num_target_updates"  # RLlib's lifetime count (DQN, SAC)


def _trial(algorithm: str):
    spec = parse_spec(
        {
            "name": f"lean-{algorithm}",
            "algorithm": algorithm,
            **SPECS[algorithm],
            "model": {"fcnet_hiddens": [16]},
            "resources": {"num_envs_per_env_runner": 1},
        }
    )
    return trainable_for(spec)(config={**trial_params(spec), "seed": 3})


def _flat(weights) -> np.ndarray:
    """Every array of a (nested) weights dict, in key order, as one vector."""
    if isinstance(weights, dict):
        return np.concatenate([_flat(weights[k]) for k in sorted(weights)])
    return np.asarray(weights, dtype=np.float64).ravel()


def _flat_mlps(module) -> int:
    """How many of the module's RLlib MLPs run the flat forward (tuner/rllib/_lean_mlp.py)."""
    from ray.rllib.core.models.torch.primitives import TorchMLP

    return sum("forward" in vars(m) for m in module.modules() if type(m) is TorchMLP)


def _fill(_=None) -> bool:
    """torch's fill of new tensors in deterministic mode, in the caller's process."""
    import torch.utils.deterministic

    return bool(torch.utils.deterministic.fill_uninitialized_memory)


def _own_step(learner) -> tuple[bool, bool]:
    # the lean step and the lean target update (DQN, SAC), set on the instance
    return "apply_gradients" in vars(learner), "after_gradient_based_update" in vars(learner)


@pytest.mark.parametrize("algorithm", ["SAC", "PPO", "DQN"])
def test_the_lean_step_trains_as_rllibs_own(ray_local, monkeypatch, algorithm):
    import torch.utils.deterministic

    start, end, lean, norm, targets, flat, fill = {}, {}, {}, {}, {}, {}, {}
    for switch in ("1", "0"):
        monkeypatch.setenv("TUNER_LEAN_STEPS", switch)
        monkeypatch.setattr(torch.utils.deterministic, "fill_uninitialized_memory", True)
        algo = _trial(algorithm)
        try:
            (learner_fill,) = [c.get() for c in algo.learner_group.foreach_learner(_fill)]
            fill[switch] = (learner_fill, algo.env_runner_group.foreach_env_runner(_fill))
            start[switch] = _flat(algo.learner_group.get_weights())
            for _ in range(2):
                result = algo.train()
            (installed,) = [c.get() for c in algo.learner_group.foreach_learner(_own_step)]
            lean[switch] = (algo._lean_steps, installed)
            (learner_mlps,) = algo.learner_group.foreach_learner(
                lambda learner: _flat_mlps(learner.module["default_policy"])
            )
            runner_mlps = algo.env_runner_group.foreach_env_runner(
                lambda runner: _flat_mlps(runner.module)
            )
            flat[switch] = (learner_mlps.get(), runner_mlps)
            end[switch] = _flat(algo.learner_group.get_weights())
            norm[switch] = result["learners"]["default_policy"].get(NORM)
            targets[switch] = result["learners"]["default_policy"].get(TARGET_UPDATES)
        finally:
            algo.stop()
        assert result["learners"]["__all_modules__"]["num_env_steps_trained_lifetime"] > 0
    target_nets = algorithm != "PPO"
    # torch's NaN fill of new tensors off in the Learner's and env runner's process
    assert fill == {"1": (False, [False]), "0": (True, [True])}
    assert lean == {"1": (True, (True, target_nets)), "0": (False, (False, False))}
    # every MLP of the learner's and the env runner's modules flat when on, none when off
    assert flat["1"][0] > 0
    assert flat["1"][1] == [flat["1"][1][0]]
    assert flat["1"][1][0] > 0
    assert flat["0"] == (0, [0])
    # the target nets updated as often (SAC: after every update), and the same below
    assert targets["1"] == targets["0"]
    if algorithm == "SAC":
        assert targets["1"] > 0
    np.testing.assert_array_equal(start["1"], start["0"])  # the same seeded start
    assert not np.allclose(end["1"], start["1"])  # it trained
    # the same updates: torch's fused Adam rounds a little differently, nothing more
    np.testing.assert_allclose(end["1"], end["0"], rtol=1e-4, atol=1e-6)
    if algorithm == "DQN":  # the clip's norm, as RLlib logs it
        assert norm["0"] > 0.01  # so every update clipped
        assert norm["1"] == pytest.approx(norm["0"], rel=1e-3)


def _nan_step(learner, clip: bool) -> tuple[bool, bool, bool]:
    """One gradient step with a NaN gradient on the module's first parameter (clipped
    first, as an update does, if `clip`)."""
    import torch

    params = learner.get_parameters(learner.module["default_policy"])
    grads = {learner.get_param_ref(p): torch.ones_like(p) for p in params}
    grads[learner.get_param_ref(params[0])] = torch.full_like(params[0], float("nan"))
    before = [p.detach().clone() for p in params]
    if clip:
        grads = learner.postprocess_gradients(grads)
    learner.apply_gradients(grads)
    moved = any(not torch.equal(b, p) for b, p in zip(before, params, strict=True))
    finite = all(bool(torch.isfinite(p).all()) for p in params)
    return moved, finite, bool((params[0].grad == 0).all())


@pytest.mark.parametrize("algorithm", ["PPO", "DQN"])  # DQN: through the global-norm clip
def test_a_nan_gradient_gets_rllibs_handling(ray_local, monkeypatch, algorithm):
    monkeypatch.setenv("TUNER_LEAN_STEPS", "1")
    algo = _trial(algorithm)
    try:
        assert algo._lean_steps
        (call,) = algo.learner_group.foreach_learner(_nan_step, clip=algorithm == "DQN")
        moved, finite, zeroed = call.get()
    finally:
        algo.stop()
    # RLlib's own apply_gradients ran: the NaN gradient was set to zero, the step taken
    assert moved
    assert finite
    assert zeroed
