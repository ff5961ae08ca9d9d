"""The lean train/eval switch (tuner/rllib/_lean_modes.py): every flag ends as torch's own
switch leaves it, torch's walk runs only where a flag changes, a copy switches itself."""

from __future__ import annotations

import copy
import io
import pickle
import random

import pytest
import torch

from tuner.rllib._lean_modes import lean_mode_switches


class Counted(torch.nn.Module):
    """A module that counts torch's own walks over it."""

    walks = 0

    def __init__(self) -> None:
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Dropout(0.5))
        self.target = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Dropout(0.5))

    def train(self, mode: bool = True):
        Counted.walks += 1
        return super().train(mode)


def flags(module: torch.nn.Module) -> list[bool]:
    return [m.training for m in module.modules()]


def test_every_flag_ends_as_torchs_switch_leaves_it():
    rng = random.Random(0)
    lean, plain = Counted(), Counted()
    assert lean_mode_switches(lean)
    for _ in range(200):
        step = rng.choice(["train", "eval", "sub-eval", "sub-train"])
        for module in (lean, plain):
            if step == "train":
                module.train()
            elif step == "eval":
                module.eval()
            elif step == "sub-eval":  # one submodule switched on its own
                module.target.eval()
            else:
                module.body[1].train()
        assert flags(lean) == flags(plain), step


def test_torchs_walk_runs_only_where_a_flag_changes():
    module = Counted()
    lean_mode_switches(module)
    Counted.walks = 0
    for _ in range(5):
        module.train()  # all in train mode already (a new module is)
    assert Counted.walks == 0
    module.eval()
    module.eval()
    assert Counted.walks == 1
    assert not any(flags(module))
    module.target[1].train()  # one flag differs: the next eval() walks
    module.eval()
    assert Counted.walks == 2
    assert not any(flags(module))


def test_a_copy_switches_itself_not_the_original():
    module = Counted()
    lean_mode_switches(module)
    module.eval()
    twin = copy.deepcopy(module)
    twin.train()
    assert all(flags(twin))
    assert not any(flags(module))
    x = torch.ones(64, 3)
    # dropout acts in the twin (train), not in the original (eval)
    torch.testing.assert_close(module.body(x), module.body(x))
    assert (twin.body(x) == 0).any()


def test_a_submodule_added_after_a_switch_is_switched_like_the_rest():
    module = Counted()
    lean_mode_switches(module)
    module.eval()
    module.extra = torch.nn.Dropout(0.5)  # a new module starts in train mode
    module.eval()
    assert not any(flags(module))


def test_the_module_still_pickles_and_switches_after_loading():
    module = Counted()
    lean_mode_switches(module)
    module.eval()
    buffer = io.BytesIO()
    torch.save(module, buffer)
    buffer.seek(0)
    for loaded in (pickle.loads(pickle.dumps(module)), torch.load(buffer, weights_only=False)):
        assert not any(flags(loaded))
        loaded.train()
        assert all(flags(loaded))
        assert not any(flags(module))  # the original is left as it was


def test_a_mode_that_is_not_a_bool_is_refused_as_torch_refuses_it():
    module = Counted()
    lean_mode_switches(module)
    with pytest.raises(ValueError, match="training mode is expected to be boolean"):
        module.train(1)


def test_only_torch_modules_take_it():
    assert not lean_mode_switches(object())


def test_a_submodule_added_later_or_left_empty_is_read_from_the_tree():
    module = Counted()
    lean_mode_switches(module)
    module.register_module("empty", None)  # torch allows a None slot
    module.eval()
    module.extra = torch.nn.Sequential(torch.nn.Linear(3, 4))  # added in train mode
    Counted.walks = 0
    module.eval()  # the new submodule differs: torch's walk runs and switches it
    assert Counted.walks == 1
    assert not any(flags(module))


def test_a_submodule_replaced_or_deleted_is_read_as_the_tree_is_now():
    module = Counted()
    lean_mode_switches(module)
    module.eval()
    module.body = torch.nn.Sequential(torch.nn.Dropout(0.5))  # the same count, a new module
    Counted.walks = 0
    module.eval()
    assert Counted.walks == 1  # the replacement (train mode) was read
    assert not any(flags(module))
    del module.target  # a deleted submodule: the answer stays torch's
    module.train()
    assert all(flags(module))
    module.train()
    assert Counted.walks == 2  # the second train() found every flag set


def test_a_pass_with_nothing_changed_reads_no_tree(monkeypatch):
    module = Counted()
    lean_mode_switches(module)
    module.eval()
    module.eval()  # the tree read once after the last registration
    monkeypatch.setattr(torch.nn.Module, "modules", lambda self: pytest.fail("read again"))
    Counted.walks = 0
    for _ in range(3):
        module.eval()
    assert Counted.walks == 0
