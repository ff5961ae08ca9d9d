"""The service's own state: its health, the Ray cluster it runs sweeps on, and the
statuses it speaks."""

from __future__ import annotations

from pydantic import Field

from tuner import statuses
from tuner.statuses import SweepStatus, TrialStatus
from tuner.views._base import _View


class NodeView(_View):
    """One alive Ray node and what it offers trials."""

    node_id: str
    node_ip: str | None = None
    is_head: bool = False
    cpus: float = 0
    gpus: float = 0
    resources: dict[str, float] = Field(
        default_factory=dict, description="Every logical resource (custom ones included)."
    )


class ClusterView(_View):
    """The Ray cluster sweeps run on, as its dashboard reports it (cached 10 s)."""

    ray_address: str | None = None
    reachable: bool = Field(
        description="Whether the cluster's node list could be read (right after a head "
        "starts it may be read but still empty)."
    )
    nodes: list[NodeView] = Field(default_factory=list)
    cpus: float = 0
    gpus: float = 0


class StatusList(_View):
    """The statuses a sweep and a trial can have, and the groups of a sweep's statuses
    the service acts on (`tuner/statuses.py`): clients such as the web page read them
    here instead of keeping a copy."""

    sweep: list[SweepStatus] = Field(..., description="A sweep's statuses, in lifecycle order.")
    terminal: list[SweepStatus] = Field(
        ..., description="A sweep's outcomes: it has ended (`finished_at` is set)."
    )
    stoppable: list[SweepStatus] = Field(..., description="Where `POST .../stop` applies.")
    resumable: list[SweepStatus] = Field(..., description="Where `POST .../resume` applies.")
    trial: list[TrialStatus] = Field(..., description="A trial's statuses (Ray Tune's).")

    @classmethod
    def current(cls) -> StatusList:
        """The vocabulary as tuner/statuses.py defines it.

        Returns:
            Every status and group, in lifecycle order.
        """
        return cls(
            sweep=list(SweepStatus),
            terminal=statuses.in_order(statuses.TERMINAL),
            stoppable=statuses.in_order(statuses.STOPPABLE),
            resumable=statuses.in_order(statuses.RESUMABLE),
            trial=list(TrialStatus),
        )


class Health(_View):
    """Liveness of the API, its store and its Ray cluster."""

    status: str
    version: str
    ray_address: str | None = None
    store: str
