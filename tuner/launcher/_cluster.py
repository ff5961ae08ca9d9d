"""The cluster's alive nodes and their resources, read from the dashboard's public
state REST API (`/api/v0/nodes`, what `ray list nodes` reads)."""

from __future__ import annotations

import logging
import time
from typing import Any

import httpx

from tuner.launcher._address import dashboard_url
from tuner.launcher._jobs import auth_headers, tls_context

log = logging.getLogger("tuner.launcher")


class ClusterNodes:
    """Alive nodes of one cluster, cached.

    A node list, or a failure, is reused for `max_age_s`; an empty list (a head whose
    node has not registered yet) is not.

    Args:
        address: Any form Ray's job client takes, resolved to the dashboard at the first
            read.
        timeout_s: The deadline of each request.
    """

    def __init__(self, address: str, timeout_s: float) -> None:
        self.address = address.rstrip("/")
        self.timeout_s = timeout_s
        self._cached: tuple[float, list[dict[str, Any]] | None] = (0.0, None)

    def read(self) -> list[dict[str, Any]]:
        """Each alive node: {node_id, node_ip, is_head, resources}.

        Returns:
            The alive nodes, uncached.

        Raises:
            httpx.HTTPError: The dashboard cannot be reached or answers with an error.
            JobsUnavailable: Its address cannot be resolved (dashboard_url).
        """
        response = httpx.get(
            f"{dashboard_url(self.address, self.timeout_s)}/api/v0/nodes",
            params={"limit": 10000},
            headers=auth_headers(),
            timeout=self.timeout_s,
            verify=tls_context(),
        )
        response.raise_for_status()
        rows = response.json()["data"]["result"]["result"]
        return [
            {
                "node_id": row["node_id"],
                "node_ip": row.get("node_ip"),
                "is_head": bool(row.get("is_head_node")),
                "resources": {k: float(v) for k, v in (row.get("resources_total") or {}).items()},
            }
            for row in rows
            if row.get("state") == "ALIVE"
        ]

    def nodes(self, max_age_s: float = 10) -> list[dict[str, Any]] | None:
        """The alive nodes, cached.

        Args:
            max_age_s: How old a cached answer may be.

        Returns:
            The alive nodes; [] while none has registered; None when the cluster cannot say
            (unreachable, an error).
        """
        fetched_at, cached = self._cached
        if fetched_at and time.monotonic() - fetched_at < max_age_s:
            return cached
        nodes, failed = None, False
        try:
            nodes = self.read()
        except Exception:  # noqa: BLE001 - no answer: the driver checks before running
            log.warning("could not read the cluster's nodes", exc_info=True)
            failed = True
        if nodes or failed:  # an empty list: nodes still registering, ask again
            self._cached = (time.monotonic(), nodes)
        return nodes
