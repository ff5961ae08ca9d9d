"""The CPU a trial trains on (tuner/rllib/_machine.py): its model, the machine's CPU
count and torch's kernel level, which a seed's numbers depend on; a machine without
/proc/cpuinfo still gets a name."""

from __future__ import annotations

import os
import platform
from pathlib import Path

import torch

from tuner.rllib import _machine
from tuner.rllib._trainables import _trial_cpu


def test_the_description_names_the_cpu_its_count_and_torchs_kernels():
    text = _machine.cpu_description()
    assert text.startswith(_machine.cpu_model() + ", ")
    assert f", {os.cpu_count()} CPUs, " in text
    assert text.endswith(
        f"torch {torch.__version__} {torch.backends.cpu.get_cpu_capability()} kernels"
    )


def test_the_model_is_read_from_proc_cpuinfo_where_linux_has_it():
    lines = Path("/proc/cpuinfo").read_text().splitlines()
    names = [line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")]
    # x86 Linux names the model there; elsewhere (ARM Linux) the platform's name stands
    expected = names[0] if names else platform.processor() or platform.machine()
    assert _machine.cpu_model() == expected


def test_without_proc_cpuinfo_the_platform_names_it(monkeypatch):
    def unreadable(self, *args, **kwargs):
        raise OSError("no such file")

    monkeypatch.setattr(Path, "read_text", unreadable)
    monkeypatch.setattr(_machine.platform, "processor", lambda: "")
    monkeypatch.setattr(_machine.platform, "machine", lambda: "riscv64")
    assert _machine.cpu_model() == "riscv64"


def test_a_trial_without_remote_learners_is_described_by_its_own_process():
    assert _trial_cpu(None) == _machine.cpu_description()
    assert _machine.learner_cpu(object()) == _machine.cpu_description()
