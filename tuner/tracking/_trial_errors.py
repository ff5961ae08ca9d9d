"""A failed trial's errors as Tune wrote them (its error file: each failure appended),
read once for the store and MLflow alike."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def error_text(trial: Any) -> str:
    """Everything Tune wrote to the trial's error file, stripped; "" where it wrote none."""
    path = trial.error_file
    if path and Path(path).exists():
        return Path(path).read_text().strip()
    return ""


def last_line(text: str, most: int = 5000) -> str:
    """The error's last line (the exception itself), or "error" where there is none."""
    return text.splitlines()[-1][:most] if text else "error"
