"""A spec's walk to its RLlib config crosses no more of tuner/'s files than when the
front door was rebuilt (#38): 22, as bench/spec_walk.py counts them (on the commit
before, cc77854, it counts 22 too), plus one since PPO's default config is the trainable's
own (rllib/_trainables.py TunerPPO.get_default_config: the lean loss, #37): 23; plus
two when modules over 500 lines were split (the spec's scheduler section in
spec/_scheduler_section.py, the service's limits in validation/_limits.py): 25."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MOST_FILES = 25


def test_a_specs_walk_to_its_rllib_config_crosses_no_more_files():
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "spec_walk.py")],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    files = int(lines[0].split()[0])
    assert files == len(lines) - 1  # the count, then each file once
    assert "validation/_checks.py" in lines  # it walks through the checks
    assert "rllib/_config.py" in lines  # ... to the RLlib config
    assert files <= MOST_FILES, "\n".join(lines)
