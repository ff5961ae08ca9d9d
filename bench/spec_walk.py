"""How many of tuner/'s files a spec crosses on its way to a trial's RLlib config.

The driver's side of a sweep, as `run_sweep` takes it: parse_spec -> resolve_space ->
validate_spec -> param_space (the RLlib config of one trial). Every call into a module
of tuner/ is recorded in order; the script prints the distinct files and the returns to
a file already left (a reader's jumps back). The walk runs once untraced first: a
process reads its data files once, on first use, and that is no part of a spec's walk.

    .venv/bin/python bench/spec_walk.py            # the count, then the files in order
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # this checkout's tuner
ROOT = REPO / "tuner"
SPEC = {
    "name": "walk",
    "algorithm": "PPO",
    "env": "CartPole-v1",
    "config": {"train_batch_size_per_learner": 256},
    "search": {
        "method": "random",
        "num_samples": 4,
        "space": {"lr": {"loguniform": [1e-4, 1e-2]}},
    },
    "scheduler": {"type": "asha"},
    "stop": {"timesteps_total": 20000},
}


def walk() -> None:
    from tuner.spec import parse_spec, resolve_space
    from tuner.sweep import param_space
    from tuner.validation import validate_spec

    spec = parse_spec(SPEC)
    space = resolve_space(spec)
    validate_spec(spec, space=space)
    param_space(spec, space)


def traced() -> list[str]:
    """The files of tuner/ the walk enters, in order (a file's consecutive calls once)."""
    seq: list[str] = []

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event != "call":
            return
        try:
            name = str(Path(frame.f_code.co_filename).resolve().relative_to(ROOT))
        except ValueError:
            return
        if not seq or seq[-1] != name:
            seq.append(name)

    walk()
    sys.setprofile(profile)
    try:
        walk()
    finally:
        sys.setprofile(None)
    return seq


def main() -> None:
    seq = traced()
    files = list(dict.fromkeys(seq))
    left: set[str] = set()
    returns = 0
    for before, name in zip([None, *seq], seq, strict=False):
        if name in left:
            returns += 1
        if before is not None:
            left.add(before)
    print(f"{len(files)} files, {returns} returns")
    print("\n".join(files))


if __name__ == "__main__":
    main()
