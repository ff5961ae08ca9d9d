"""The metric a sweep's scheduler judges trials on, where it is not the one TuneConfig
names (tuner.spec.scheduler_metric: the training return where the sweep ranks by an
evaluation run only at the end)."""

from __future__ import annotations

from typing import Any


class JudgedOn:
    """Mixin for a Tune scheduler: it judges trials on `judged_on` where set, whatever
    metric TuneConfig names."""

    judged_on: str | None = None

    def set_search_properties(self, metric: str | None, mode: str | None, **spec: Any) -> bool:
        """Tune's metric and mode, the metric replaced by `judged_on` where set."""
        return super().set_search_properties(  # type: ignore[misc]
            self.judged_on or metric, mode, **spec
        )
