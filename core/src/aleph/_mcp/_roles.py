"""What the MCP helpers need of a server connection and of the manager, as protocols.

The capability tools (:mod:`._captools`) and the OAuth login (:mod:`._oauth`) work on any object with
these shapes; :class:`~aleph._mcp._server.ServerConnection` and :class:`~aleph._mcp._manager.McpManager`
have them. Naming the shapes here, rather than importing those classes, keeps the helpers below the
manager and the connection in the import graph (no circle through a type annotation).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import mcp_types as types

    from aleph._config import McpServerConfig

__all__ = ["Connection", "ConnectionOwner", "ConnectionRegistry"]


class Connection(Protocol):
    """One MCP server's connection: its id, settings, what it offers, and reads through it."""

    @property
    def id(self) -> str:
        """The server id (``[mcp.servers.<id>]``)."""
        ...

    @property
    def config(self) -> McpServerConfig:
        """The server's settings with environment references expanded."""
        ...

    @property
    def transport(self) -> str:
        """``"stdio"`` or ``"http"``."""
        ...

    @property
    def connected(self) -> bool:
        """The server answers requests."""
        ...

    auth: Any
    """The ``httpx2.Auth`` a login installed (None until then)."""

    @property
    def resources(self) -> Sequence[types.Resource]:
        """The resources the server lists."""
        ...

    @property
    def templates(self) -> Sequence[types.ResourceTemplate]:
        """The resource templates the server lists."""
        ...

    @property
    def prompts(self) -> Sequence[types.Prompt]:
        """The prompts the server lists."""
        ...

    async def read_resource(self, tool: str, uri: str) -> Any:
        """Read ``uri`` on behalf of the tool ``tool``."""
        ...

    async def get_prompt(self, tool: str, name: str, arguments: dict[str, Any]) -> Any:
        """Render the prompt ``name`` with ``arguments`` on behalf of the tool ``tool``."""
        ...


class ConnectionRegistry(Protocol):
    """The manager as the capability tools and the login see it: find servers, reconnect, run in the background."""

    @property
    def data_dir(self) -> Path:
        """Aleph's data directory (tokens live under ``mcp/tokens``)."""
        ...

    @property
    def logins(self) -> set[str]:
        """Servers with an OAuth login waiting for its browser redirect."""
        ...

    def server(self, server_id: str) -> Connection | None:
        """The connection of ``server_id``, or None."""
        ...

    def connected(self) -> Sequence[Connection]:
        """Connected servers, sorted by id."""
        ...

    def find_server_prefix(self, text: str) -> tuple[Connection, str] | None:
        """Split an opaque id ``{server}:{rest}`` at the first ``:`` whose prefix is a known server."""
        ...

    def template_tool_name(self, server_id: str, template_name: str) -> str:
        """The typed tool name of a resource template."""
        ...

    def reconnect(self, conn: Any) -> None:
        """Drop and re-open ``conn`` (one of this registry's own connections)."""
        ...

    def spawn(self, func: Any, *args: Any) -> None:
        """Run ``func(*args)`` in the manager's task group."""
        ...


class ConnectionOwner(ConnectionRegistry, Protocol):
    """The manager as a server connection sees it: restart policy, in-process peers, and what to tell it."""

    policy: Any
    """The restart policy (``RestartPolicy``: health interval, back-off, restart budget)."""
    inprocess: dict[str, Any]
    """In-process MCP servers by id (tests and embedded peers)."""
    chain_id: str | None
    """This runtime's identity in ``ALEPH_SERVE_CHAIN`` (None: not passed on)."""

    def server_ready(self, conn: Any) -> None:
        """``conn`` connected and listed what it offers."""
        ...

    def server_lost(self, conn: Any) -> None:
        """``conn`` lost its connection (or gave up)."""
        ...

    def lists_changed(self, conn: Any, kinds: set[str]) -> None:
        """``conn`` re-listed ``kinds`` (tools, resources, prompts)."""
        ...
