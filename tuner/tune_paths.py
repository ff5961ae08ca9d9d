"""Where a sweep's Tune runs live, spelled once: the search's run directory under the
Tune storage and the confirmation stage's beside it.

The driver (tuner/sweep/), `tuner run` and the purge (tuner/purge.py) read them from
here. Plain strings only: importing this module loads no Ray, so the purge runs without
it.
"""

from __future__ import annotations

CONFIRM_SUFFIX = "-confirm"  # the confirmation stage's run: <search run>-confirm


def run_dir(storage_path: str, name: str) -> str:
    """Where Tune keeps the experiment state of run `name` (a path or URI)."""
    return f"{storage_path.rstrip('/')}/{name}"


def confirm_run(run: str) -> str:
    """The confirmation stage's run beside a search run (its name, or its directory)."""
    return f"{run.rstrip('/')}{CONFIRM_SUFFIX}"


def with_scheme(path: str | None, storage_path: str) -> str | None:
    """Tune reports paths on an object store without their scheme ('bucket/run/...');
    give them back the storage's ('s3://bucket/run/...') so they can be used as is."""
    if not path or "://" not in storage_path or "://" in path:
        return path
    return f"{storage_path.split('://', 1)[0]}://{path}"
