"""Importing this module leaves a mark: tests check that validating a spec that names it
imports nothing (TUNER_PROBE_FILE says where the mark goes)."""

import os
from pathlib import Path

Path(os.environ.get("TUNER_PROBE_FILE", "probe-imported")).write_text("imported")


class ProbeEnv:  # never reached: the import above is what the tests watch for
    pass
