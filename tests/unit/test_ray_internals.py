"""Every private name of Ray that tuner uses is listed in the adapter package's
PRIVATE_NAMES (tuner/ray_internals/, read from its ray_internals.yaml), every one that a
module of the package spells is listed there, and each still exists in the installed Ray
with the shape we use: an upgrade that moves one fails here, by name, instead of
somewhere in a sweep."""

from __future__ import annotations

import ast
import hashlib
import importlib
import inspect
from pathlib import Path

import pytest

from tuner import ray_internals
from tuner.ray_internals import (
    DQN_EXPLORATION_SOURCE,
    LEARNER_UPDATE_SOURCE,
    PRIVATE_NAMES,
    SAMPLE_SOURCE,
    TRAINING_STEP_SOURCE,
    PrivateName,
)

# the adapter: every module of the package behind tuner.ray_internals
ADAPTER = Path(ray_internals.__file__).parent

# the parameters of each private method we override, as our hooks call them
OVERRIDE_PARAMS = {
    "_sample": [
        "self",
        "num_timesteps",
        "num_episodes",
        "explore",
        "random_actions",
        "force_reset",
    ],
    "_try_env_step": ["self", "actions"],
    "_reset_envs_and_episodes": ["self", "explore"],
    "_make_on_episode_callback": ["self", "which", "idx", "episodes"],
    "_new_episode": ["self", "env_index", "episodes"],
    "_log_env_steps": ["self", "metric", "num_steps"],
    "_increase_sampled_metrics": ["self", "num_steps", "num_episodes_completed"],
    "_create_local_replay_buffer_if_necessary": ["self", "config"],
    "_build_qf_encoder_continuous": ["self", "framework"],
    "_get_new_config": ["self", "trial", "trial_to_clone"],
    "_run_one_training_iteration": ["self"],
    "_update": ["self", "batch", "kwargs"],
    "_log_steps_trained_metrics": ["self", "batch"],
    "_compute_off_policyness": ["self", "batch"],
    "_forward_exploration": ["self", "batch", "t"],
    "_create_iterator_if_necessary": [
        "self",
        "training_data",
        "num_total_minibatches",
        "num_epochs",
        "minibatch_size",
        "shuffle_batch_per_epoch",
        "kwargs",
    ],
}


def owner_of(use: PrivateName) -> object:
    module, _, qualname = use.owner.partition(":")
    obj: object = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def sources(cls: type) -> str:
    """The source of a class and every class it inherits from, outside builtins."""
    return "".join(
        inspect.getsource(c) for c in inspect.getmro(cls) if c.__module__.startswith("ray.")
    )


@pytest.mark.parametrize("use", PRIVATE_NAMES, ids=lambda u: f"{u.owner}.{u.name}")
def test_each_private_name_we_use_is_still_there(use):
    assert use.name.startswith("_"), use
    assert use.why, use
    owner = owner_of(use)
    if use.kind == "config key":
        from ray.rllib.algorithms.ppo import PPOConfig

        assert use.name in PPOConfig().to_dict(), f"to_dict() no longer has {use.name}"
    elif use.kind == "attribute":
        assert isinstance(owner, type)
        assert f"self.{use.name}" in sources(owner) or hasattr(owner, use.name), (
            f"{use.owner} no longer sets {use.name}"
        )
    elif use.kind in ("method we override", "method we call"):
        method = getattr(owner, use.name)
        params = list(inspect.signature(method).parameters)
        assert params == OVERRIDE_PARAMS[use.name], f"{use.owner}.{use.name}{params}"
    elif use.kind == "keyword":
        # a parameter, or a keyword the function takes out of its **kwargs by name
        taken = use.name in inspect.signature(owner).parameters
        taken = taken or f'"{use.name}"' in inspect.getsource(inspect.unwrap(owner))
        assert taken, f"{use.owner}({use.name}=)"
    elif use.kind == "copied code":
        digest = hashlib.sha256(inspect.getsource(getattr(owner, use.name)).encode())
        assert digest.hexdigest() == TRAINING_STEP_SOURCE, (
            f"{use.owner}.{use.name} changed: port the flat replay path's training_step "
            "again (tuner/rllib/_fast_replay.py), then update TRAINING_STEP_SOURCE"
        )
    else:
        pytest.fail(f"unknown kind {use.kind!r}")


def private_names_spelled(tree: ast.Module) -> set[str]:
    """The private names a module's code spells: attributes, keywords, identifier-like
    strings and the functions it defines."""
    spelled = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    spelled |= {
        k.arg for n in ast.walk(tree) if isinstance(n, ast.Call) for k in n.keywords if k.arg
    }
    spelled |= {
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.isidentifier()
    }
    spelled |= {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    return {s for s in spelled if s.startswith("_") and s.strip("_") and not s.startswith("__")}


def test_every_private_name_the_adapter_spells_is_listed():
    """The adapter's own code, every module of the package, reaches for no private name
    its PRIVATE_NAMES lacks."""
    modules = sorted(ADAPTER.rglob("*.py"))
    assert {p.name for p in modules} >= {"__init__.py", "_learner.py", "_tune.py"}
    listed = {u.name for u in PRIVATE_NAMES}
    unlisted = {}
    for path in modules:
        private = private_names_spelled(ast.parse(path.read_text()))
        if private - listed:
            unlisted[path.relative_to(ADAPTER).as_posix()] = sorted(private - listed)
    assert unlisted == {}
    # the scan sees the names the modules reach for (else it passes on nothing)
    seen = set().union(*(private_names_spelled(ast.parse(p.read_text())) for p in modules))
    assert {"_weights_seq_no", "_get_new_config", "_system_config", "_model_config"} <= seen


def test_the_spelled_names_scan_sees_each_kind_of_use():
    source = """
x = learner._params
f(_no_metrics_reduce=True)
KEY = "_model_config"
class Hook:
    def _create_iterator_if_necessary(self): ...
"""
    assert private_names_spelled(ast.parse(source)) == {
        "_params",
        "_no_metrics_reduce",
        "_model_config",
        "_create_iterator_if_necessary",
    }


def test_the_hooks_reach_rllibs_default_through_the_private_method():
    """A hook mixin calls the subclass's public method with RLlib's own as the default."""

    class Base:
        def _get_new_config(self, trial, trial_to_clone):
            return {"from": "tune"}, {}

    class Ours(ray_internals.PB2ConfigHook, Base):
        def tuner_new_config(self, trial, trial_to_clone, tune_default):
            config, ops = tune_default(trial, trial_to_clone)
            return {**config, "ours": True}, ops

    assert Ours()._get_new_config(None, None) == ({"from": "tune", "ours": True}, {})


def test_config_key_reads_a_property_under_its_private_name():
    from ray.rllib.algorithms.ppo import PPOConfig

    config = PPOConfig().to_dict()
    assert ray_internals.config_key("train_batch_size_per_learner", config) == (
        "_train_batch_size_per_learner"
    )
    assert ray_internals.config_key("lr", config) == "lr"


def test_a_restore_forgets_the_decisions_pending_on_saves_in_flight(tmp_path):
    """Tune writes its live controller's pending decisions into the experiment state; a
    restore drops them (tests/integration/test_chaos.py shows the retry they would stop)."""
    import json

    from ray.tune.execution.tune_controller import TuneController

    from tuner.ray_internals import forget_pending_decisions

    kept = {"_iteration": 7}
    state = {
        "trial_data": [],
        "runner_data": {
            **kept,
            "_cached_trial_decisions": {"a_00000": "STOP"},
            "_queued_trial_decisions": {"a_00001": "CONTINUE"},
        },
    }
    path = tmp_path / "experiment_state-2026-11-25_00-00-00.json"
    path.write_text(json.dumps(state))
    assert forget_pending_decisions(str(tmp_path)) == 2
    runner = json.loads(path.read_text())["runner_data"]
    assert runner == {**kept, "_cached_trial_decisions": {}, "_queued_trial_decisions": {}}
    assert forget_pending_decisions(str(tmp_path)) == 0
    # the controller still saves them in its state (else this workaround has outlived Tune's bug)
    assert {"_cached_trial_decisions", "_queued_trial_decisions"} <= set(
        TuneController.__init__.__code__.co_names
    )


def test_rllibs_torch_compile_learner_still_compiles_no_module():
    """RLlib 2.60's TorchLearner.build skips every module (it tests the MultiRLModule);
    this fails once the installed RLlib compiles them, and `tuner validate`'s warning
    (warn_torch_compile) then goes quiet by itself."""
    assert ray_internals.learner_compile_skips_modules()
    fixed = (
        "for module in self._module._rl_modules.values():\n"
        "    if isinstance(module, TorchRLModule):\n"
        "        module.compile(self._torch_compile_cfg)\n"
    )
    assert not ray_internals.learner_compile_skips_modules(fixed)
    assert ray_internals.learner_compile_skips_modules(fixed.replace("(module,", "(self._module,"))


def test_the_lean_target_update_was_ported_from_the_installed_rllibs():
    """lean_target_updates re-implements DQNLearner.after_gradient_based_update: a Ray
    whose method changed fails here until the port is checked again."""
    from ray.rllib.algorithms.dqn.dqn_learner import DQNLearner

    source = inspect.getsource(DQNLearner.after_gradient_based_update)
    assert hashlib.sha256(source.encode()).hexdigest() == ray_internals.TARGET_UPDATE_SOURCE


@pytest.mark.parametrize("tau", [0.005, 0.3, 1.0])
def test_the_polyak_average_is_rllibs_bit_for_bit(tau):
    import copy

    import torch
    from ray.rllib.core.learner.utils import update_target_network

    torch.manual_seed(0)

    def net(width: int) -> torch.nn.Module:
        return torch.nn.Sequential(
            torch.nn.Linear(3, width), torch.nn.ReLU(), torch.nn.Linear(width, 1)
        )

    # two pairs (as SAC's Q and twin Q), and one with an integer buffer
    pairs = [
        (net(8), net(8)),
        (net(16), net(16)),
        (torch.nn.BatchNorm1d(4), torch.nn.BatchNorm1d(4)),
    ]
    pairs[2][0].num_batches_tracked += 7
    ours = copy.deepcopy(pairs)
    before = pairs[0][1][0].weight.detach().clone()
    for main, target in pairs:
        update_target_network(main_net=main, target_net=target, tau=tau)
    ray_internals.polyak_average(ours, tau)
    for (_, rllib_target), (_, our_target) in zip(pairs, ours, strict=True):
        for (name, a), b in zip(
            rllib_target.state_dict().items(), our_target.state_dict().values(), strict=True
        ):
            assert torch.equal(a, b), name
    assert not torch.equal(ours[0][1][0].weight, before)  # the targets moved


def test_the_one_batch_update_follows_the_installed_learner_update():
    """ray_internals.single_batch_update makes Learner.update's calls for one tensor
    batch: a Ray whose Learner.update changed fails here until it is checked again."""
    from ray.rllib.core.learner.learner import Learner

    digest = hashlib.sha256(inspect.getsource(Learner.update).encode()).hexdigest()
    assert digest == LEARNER_UPDATE_SOURCE, (
        "Learner.update changed: check ray_internals.single_batch_update against it, "
        "then update LEARNER_UPDATE_SOURCE"
    )


def test_the_lean_dqn_exploration_follows_the_installed_one():
    """rllib/_lean_exploration.py computes DefaultDQNTorchRLModule._forward_exploration's
    actions: a Ray whose pass changed fails here until it is checked again."""
    from ray.rllib.algorithms.dqn.torch.default_dqn_torch_rl_module import (
        DefaultDQNTorchRLModule,
    )

    source = inspect.getsource(DefaultDQNTorchRLModule._forward_exploration)
    assert hashlib.sha256(source.encode()).hexdigest() == DQN_EXPLORATION_SOURCE, (
        "DefaultDQNTorchRLModule._forward_exploration changed: check "
        "tuner/rllib/_lean_exploration.py against it, then update DQN_EXPLORATION_SOURCE"
    )


def test_the_lean_timestep_loop_follows_the_installed_one():
    """ray_internals/_rollout.py does what SingleAgentEnvRunner._sample does for the
    timesteps it covers: a Ray whose loop changed fails here until it is checked again."""
    from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner

    source = inspect.getsource(SingleAgentEnvRunner._sample)
    assert hashlib.sha256(source.encode()).hexdigest() == SAMPLE_SOURCE, (
        "SingleAgentEnvRunner._sample changed: check tuner/ray_internals/_rollout.py "
        "against it, then update SAMPLE_SOURCE"
    )
