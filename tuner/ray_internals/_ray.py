"""Ray core's private names: ray.init's."""

from __future__ import annotations

from typing import Any


def no_prestarted_workers() -> dict[str, Any]:
    """ray.init keywords for a local Ray that starts no idle worker ahead of its driver."""
    return {"_system_config": {"prestart_worker_first_driver": False}}
