"""Old import paths, kept for what earlier versions pickled.

Tune states of sweeps to resume (`tuner.pkl`: callbacks, stoppers, schedulers, the
multi-agent mapping) and RLlib checkpoints to restore (`tuner evaluate`, registered
models: the trainable's class).

What a sweep runs lives in tuner.rllib, tuner.tracking and tuner.sweep; such files may
still name it under `tuner.trials`. `import tuner.trials._<old module>` gives a module
whose names are looked up where they live. Nothing new imports from here.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
from typing import Any

# old module -> the modules its names live in now, searched in order
MOVED: dict[str, tuple[str, ...]] = {
    "_algorithms": (
        "tuner.rllib._trainables",
        "tuner.rllib._trial_config",
        "tuner.rllib._multi_agent",
        "tuner.rllib._settings",
        "tuner.rllib._update_ratio",
        "tuner.rllib._user_code",
        "tuner.rllib._config",
    ),
    "_mlflow": ("tuner.tracking._mlflow_tracker", "tuner.tracking._mlflow_metrics"),
    "_store_callback": ("tuner.tracking._store_callback", "tuner.sweep._graceful"),
    "_stoppers": ("tuner.sweep._stoppers", "tuner.results"),
    "_summary": ("tuner.sweep._summary", "tuner.results"),
    **{
        m: (f"tuner.rllib.{m}",)
        for m in ("_custom", "_envs", "_evaluate", "_fast_replay", "_resources", "_sac_model")
    },
    **{
        m: (f"tuner.tracking.{m}",)
        for m in ("_mlflow_metrics", "_mlflow_report", "_mlflow_tracker", "_mlflow_writer")
    },
    **{
        m: (f"tuner.sweep.{m}",)
        for m in (
            "_confirm",
            "_graceful",
            "_interrupt",
            "_pb2",
            "_progress",
            "_run",
            "_schedulers",
            "_tuner",
        )
    },
}


class _Moved(types.ModuleType):
    """An old module: each name is taken from the first new module that has it."""

    def __init__(self, name: str, homes: tuple[str, ...]) -> None:
        super().__init__(name)
        self._homes = homes

    def __getattr__(self, attr: str) -> Any:
        for home in self._homes:
            module = importlib.import_module(home)
            if hasattr(module, attr):
                return getattr(module, attr)
        raise AttributeError(f"{attr!r} is in none of {', '.join(self._homes)}")


class _MovedFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        prefix, _, old = fullname.rpartition(".")
        if prefix != __name__ or old not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return _Moved(spec.name, MOVED[spec.name.rpartition(".")[2]])

    def exec_module(self, module: types.ModuleType) -> None:
        return None


if not any(isinstance(f, _MovedFinder) for f in sys.meta_path):
    sys.meta_path.append(_MovedFinder())
