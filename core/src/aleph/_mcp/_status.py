"""What ``aleph mcp list`` shows for one server (kept free of SDK imports so ``import aleph`` stays light)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["ServerStatus", "State"]

State = Literal["connecting", "connected", "degraded", "restarting", "dead", "disabled"]


@dataclass
class ServerStatus:
    """What ``aleph mcp list`` shows for one server."""

    id: str
    transport: Literal["stdio", "http"]
    state: State
    reason: str | None = None
    protocol_version: str | None = None
    capabilities: list[str] = field(default_factory=list)
    tools: int = 0
    resources: int = 0
    templates: int = 0
    prompts: int = 0
    restarts: int = 0
    quarantined: list[dict[str, str]] = field(default_factory=list)
    changed_tools: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    target: str = ""

    def to_json(self) -> dict[str, Any]:
        """JSON form for ``aleph mcp list --json``."""
        return {
            "id": self.id,
            "transport": self.transport,
            "target": self.target,
            "state": self.state,
            "reason": self.reason,
            "protocol_version": self.protocol_version,
            "capabilities": self.capabilities,
            "tools": self.tools,
            "resources": self.resources,
            "templates": self.templates,
            "prompts": self.prompts,
            "restarts": self.restarts,
            "quarantined": self.quarantined,
            "changed_tools": self.changed_tools,
            "warnings": self.warnings,
        }
