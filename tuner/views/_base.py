"""The base of every view: built from attributes too (the store's rows), and free to
name fields `model_*`."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class _View(BaseModel):
    model_config = ConfigDict(from_attributes=True, protected_namespaces=())
