"""The multi_agent section of a spec: its policies and which agent each one drives."""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field, model_validator

from tuner.spec._base import SpecModel, field_errors

# A policy (RLModule) id: part of result keys, MLflow metric names and checkpoint paths.
MODULE_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
# An agent id as a policy_mapping key (what str() of the env's agent id gives), or "*".
AGENT_ID_RE = re.compile(r"^(\*|[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})$")
# RLlib's own module ids: the single-agent one, and the learners' key for all modules.
RESERVED_MODULE_IDS = ("default_policy", "__all_modules__")


class MultiAgentSpec(SpecModel):
    """Multi-agent training: the policies (RLModules) and which agent each one drives."""

    policies: list[str] = Field(
        default_factory=lambda: ["shared"],
        min_length=1,
        max_length=64,
        description="Policy (RLModule) ids, each trained with its own weights and the "
        "spec's `model`; one id is a policy every agent shares. Letters, digits, '_', '.', "
        "'-' (at most 64).",
        json_schema_extra={"items": {"type": "string", "pattern": MODULE_ID_RE.pattern}},
    )
    policy_mapping: dict[str, str] = Field(
        default_factory=dict,
        max_length=1024,
        description="Agent id (as str() of the env's agent id) -> policy id; the key '*' "
        "names the policy of every agent not listed, otherwise they go to the first "
        "policy. Data only: RLlib's policy_mapping_fn is built from it.",
        json_schema_extra={"propertyNames": {"pattern": AGENT_ID_RE.pattern}},
    )

    @model_validator(mode="after")
    def _known_policies(self) -> MultiAgentSpec:
        errors: list[tuple[tuple[str | int, ...], str, Any]] = []

        def bad(loc: tuple[str | int, ...], value: str, msg: str) -> None:
            errors.append((loc, msg, value))

        seen: set[str] = set()
        for i, pid in enumerate(self.policies):
            if not MODULE_ID_RE.fullmatch(pid):
                bad(
                    ("policies", i),
                    pid,
                    "a policy id is letters, digits, '_', '.', '-' "
                    "(at most 64, starting with a letter or digit)",
                )
            elif pid in RESERVED_MODULE_IDS:
                bad(("policies", i), pid, "RLlib's own module id; name the policy otherwise")
            elif pid in seen:
                bad(("policies", i), pid, "listed twice")
            seen.add(pid)
        for agent, pid in self.policy_mapping.items():
            if not AGENT_ID_RE.fullmatch(agent):
                bad(
                    ("policy_mapping", agent),
                    agent,
                    "an agent id is letters, digits, "
                    "'_', '.', '-' (at most 128), or '*' for every agent not listed",
                )
            elif pid not in self.policies:
                bad(
                    ("policy_mapping", agent),
                    pid,
                    "not one of multi_agent.policies (" + ", ".join(self.policies) + ")",
                )
        if errors:
            raise field_errors(self, errors)
        return self

    def policy_of(self, agent_id: object) -> str:
        """The policy that drives `agent_id`: its mapping, else '*', else the first.

        Args:
            agent_id: The env's agent id.

        Returns:
            The policy's name.
        """
        return self.policy_mapping.get(
            str(agent_id), self.policy_mapping.get("*", self.policies[0])
        )
