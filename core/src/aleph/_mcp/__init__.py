"""MCP for Aleph: the client manager (servers → tools in the shared registry) and ``aleph serve``.

See docs/mcp.md. Public names are re-exported from :mod:`aleph`.
"""

from __future__ import annotations

from aleph._mcp._captools import CAPABILITY_TOOLS
from aleph._mcp._manager import McpManager, RestartPolicy
from aleph._mcp._status import ServerStatus

__all__ = ["CAPABILITY_TOOLS", "McpManager", "RestartPolicy", "ServerStatus"]
