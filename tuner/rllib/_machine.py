"""The CPU a trial trains on, with torch's kernel level there.

A seeded trial trains the same numbers again only on the same kernels: torch, oneDNN and
MKL pick their code paths (AVX2, AVX-512, ...) by the CPU, the paths round differently,
and a DQN or PPO run amplifies the difference until another policy comes out
(docs/benchmarks.md, 2026-12-02). So each trial's run names the CPU it trained on
(the MLflow tag `tuner.cpu`), and a figure is compared with another only where the two
match.
"""

from __future__ import annotations

import contextlib
import os
import platform
from pathlib import Path
from typing import Any


def cpu_model() -> str:
    """The CPU's model name (Linux's /proc/cpuinfo), else what `platform` knows."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine() or "unknown CPU"


def cpu_description() -> str:
    """This process's CPU, how many the machine has and torch's kernel level on it.

    Returns:
        E.g. "Intel(R) Xeon(R) Processor, 2 CPUs, torch 2.13.0+cpu AVX512 kernels".
    """
    import torch

    level = torch.backends.cpu.get_cpu_capability()
    return f"{cpu_model()}, {os.cpu_count()} CPUs, torch {torch.__version__} {level} kernels"


def learner_cpu(learner: Any) -> str:
    """`cpu_description` in a Learner's process (LearnerGroup.foreach_learner).

    Args:
        learner: The Learner (unused: the process is what is described).

    Returns:
        That process's CPU description.
    """
    return cpu_description()
