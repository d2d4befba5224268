"""``hub_consent``: the step at which a human approves what an install adds.

``hub_install_run`` and ``skill_install`` submit it through the chokepoint with the full disclosure
as its arguments (a plugin's tools with their facts and hooks; a skill's files, scripts, the tools it
names and its findings), so the approval prompt shows exactly what is being approved and the grant
binds to that digest. It declares its own confirmation gate, so it asks under every tier and no
``allow`` rule switches it off; calling it directly changes nothing.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from aleph import AlephTool, ToolArgs, ToolFacts

__all__ = ["HubConsent"]


class ConsentArgs(ToolArgs):
    kind: Literal["plugin", "skill"]
    """What is being installed."""
    subject: str = Field(min_length=1, max_length=300)
    """The distribution and version, or the skill id and source."""
    digest: str = Field(pattern=r"^sha256:[0-9a-f]{64}$")
    """SHA-256 of the complete description of what it adds (the approval binds to it)."""
    disclosure: str = Field(min_length=2, max_length=200_000)
    """What it adds, as JSON text shown to the human."""


class HubConsent(AlephTool[ConsentArgs]):
    NAME = "hub_consent"
    DESCRIPTION = (
        "Ask the human to approve what a plugin or skill install adds. hub_install_run and skill_install submit "
        "this themselves with the full disclosure; calling it directly installs nothing."
    )
    Args = ConsentArgs
    FACTS = ToolFacts(idempotent=True, requires_approval=True, concurrent_safe=True, tags=("approval",))

    async def call(self, args: ConsentArgs) -> dict[str, Any]:
        return {"approved": True, "kind": args.kind, "subject": args.subject, "digest": args.digest}
