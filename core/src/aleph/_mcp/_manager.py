"""The MCP client manager: every configured server, its tools in the shared registry, and the capability tools.

The manager only registers tools; every call still goes through whatever ``rt.tool_service()``
returns (the permission chokepoint). Registration follows R17.1-R17.6: ``{server}__{tool}`` names,
quarantined schemas, untrusted annotations, pinned definitions, capability-gated builtins.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from aleph._config import McpConfig
from aleph._contract._registry import ToolRegistry
from aleph._contract._tool import LoopTool
from aleph._contract._types import ToolFacts, ToolSource
from aleph._errors import DuplicateTool
from aleph._mcp._captools import CAPABILITY_TOOLS, build_capability_tool, build_template_tool
from aleph._mcp._hygiene import (
    Quarantined,
    definition_hash,
    injection_markers,
    normalize_schema,
    sanitize_name,
    truncate_description,
    wire_name,
)
from aleph._mcp._pins import PinStore
from aleph._mcp._status import ServerStatus

if TYPE_CHECKING:
    import mcp_types as types

    from aleph._mcp._server import ServerConnection

__all__ = ["McpManager", "RestartPolicy"]

log = logging.getLogger("aleph.mcp")


@dataclass(frozen=True)
class RestartPolicy:
    """Health checks and bounded restarts (reference: every 30 s, 3 failures, 3 restarts per 300 s)."""

    health_interval: float = 30.0
    """Seconds between health probes of a connected server."""
    unhealthy_after: int = 3
    """Consecutive failed probes that trigger a restart (2 already mark it degraded)."""
    max_restarts: int = 3
    """Restarts allowed within ``restart_window``; one more failure marks the server dead."""
    restart_window: float = 300.0
    """Seconds over which restarts are counted."""
    backoff_base: float = 1.0
    """First restart delay; doubled for each restart in the window."""


class _McpTool(LoopTool):
    """A tool offered by an MCP server; calls the server with the tool's inner name."""

    def __init__(
        self, conn: ServerConnection, inner: str, wire: str, description: str, schema: dict[str, Any], facts: ToolFacts
    ) -> None:
        super().__init__(wire, description, schema, facts=facts)
        self.conn = conn
        self.inner = inner
        self._budget_s = (facts.max_duration_ms or 330_000) / 1000

    async def call(self, input: dict[str, Any]) -> Any:
        """Forward to the server."""
        return await self.conn.call_tool(self._name, self.inner, input, self._budget_s)


def _annotations(tool: types.Tool) -> dict[str, Any] | None:
    ann = tool.annotations
    return None if ann is None else ann.model_dump(mode="json", exclude_none=True)


class McpManager:
    """Connects the configured MCP servers and keeps their tools in ``registry`` live.

    :param config: the ``[mcp]`` section.
    :param registry: the shared tool registry.
    :param data_dir: Aleph's data directory (pins and tokens live under ``mcp/``).
    :param policy: health and restart settings.
    :param inprocess: server id → ``MCPServer`` object to connect in-process instead of the configured
        transport (tests and embedding programs).
    """

    def __init__(
        self,
        config: McpConfig,
        registry: ToolRegistry,
        data_dir: Path,
        *,
        policy: RestartPolicy | None = None,
        inprocess: Mapping[str, Any] | None = None,
        chain_id: str | None = None,
    ) -> None:
        self.config = config
        self.chain_id = chain_id
        """The owning runtime's configuration identity, passed to stdio servers (a nested serve refuses)."""
        self.registry = registry
        self.data_dir = Path(data_dir)
        self.policy = policy or RestartPolicy()
        self.inprocess: dict[str, Any] = dict(inprocess or {})
        self.pins = PinStore(self.data_dir / "mcp" / "pins.json")
        if config.servers:
            # The SDK is imported only when a server is configured: `import aleph` stays light.
            from aleph._mcp._server import ServerConnection
        self.connections: dict[str, ServerConnection] = {
            sid: ServerConnection(sid, cfg, self) for sid, cfg in config.servers.items()
        }
        self._registered: dict[str, dict[str, tuple[Any, ...]]] = {sid: {} for sid in self.connections}
        self._capability_tools: set[str] = set()
        self._tg: anyio.abc.TaskGroup | None = None
        self._started = False
        self.logins: set[str] = set()
        """Servers with an OAuth login waiting for its browser redirect."""

    # -- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        """Connect every enabled server concurrently; returns once each has connected or failed once.

        A slow or hanging server never stalls the others: each first attempt is bounded by its own
        ``timeout_seconds``. Call :meth:`aclose` from the same task.
        """
        if self._started:
            return
        self._started = True
        enabled = [c for c in self.connections.values() if c.raw_config.enabled]
        self._reconcile_capability_tools()
        if not enabled:
            return
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        for conn in enabled:
            self._tg.start_soon(conn.supervise, name=f"mcp-{conn.id}")
        for conn in enabled:
            await conn.first_attempt.wait()

    async def aclose(self) -> None:
        """Stop every server and remove their tools; safe to call twice."""
        for conn in self.connections.values():
            conn.stop()
        if self._tg is not None:
            tg, self._tg = self._tg, None
            tg.cancel_scope.cancel()
            await tg.__aexit__(None, None, None)
        for sid in self.connections:
            self._unregister_server(sid)
        for name in sorted(self._capability_tools):
            self.registry.unregister(name)
        self._capability_tools.clear()

    def spawn(self, func: Any, *args: Any) -> None:
        """Run ``func(*args)`` as a background task of the manager (OAuth callbacks)."""
        if self._tg is None:
            raise RuntimeError("the MCP manager is not started; use `async with aleph.load() as rt:`")
        self._tg.start_soon(func, *args)

    def reconnect(self, conn: ServerConnection) -> None:
        """Reconnect ``conn`` now (after a login), reviving it if it was dead."""
        if conn.running:
            conn.request_reconnect()
            return
        conn._restart_times.clear()
        conn.state = "restarting"
        self.spawn(conn.supervise)

    def servers(self) -> list[ServerStatus]:
        """One status per configured server, sorted by id."""
        return [self.connections[sid].status() for sid in sorted(self.connections)]

    def server(self, server_id: str) -> ServerConnection | None:
        """The connection of ``server_id``."""
        return self.connections.get(server_id)

    # -- events from connections ------------------------------------------------------------------

    def server_ready(self, conn: ServerConnection) -> None:
        """A (re)connection finished its first listing."""
        self._sync_server(conn)
        self._reconcile_capability_tools()

    def server_lost(self, conn: ServerConnection) -> None:
        """The connection ended (crash, health failure, stop): drop its tools (R17.5)."""
        conn.tools, conn.resources, conn.templates, conn.prompts = [], [], [], []
        self._unregister_server(conn.id)
        self._reconcile_capability_tools()

    def lists_changed(self, conn: ServerConnection, kinds: set[str]) -> None:
        """A list_changed notification was re-listed: re-register and re-gate."""
        if kinds & {"tools", "resources"}:
            self._sync_server(conn)
        self._reconcile_capability_tools()

    # -- registration ----------------------------------------------------------------------------

    def _unregister_server(self, sid: str) -> None:
        for name in list(self._registered.get(sid, {})):
            self.registry.unregister(name)
        self._registered[sid] = {}

    def _tool_entry(self, conn: ServerConnection, tool: types.Tool, new_pins: dict[str, str], known: bool) -> _McpTool:
        sid = conn.id
        wire = wire_name(sid, tool.name)
        schema = normalize_schema(tool.input_schema)
        description = truncate_description(tool.description)
        markers = injection_markers(tool.description or "")
        if markers:
            conn._warn(f"tool {tool.name!r}: possible prompt injection in its description ({', '.join(markers)})")
            log.warning("MCP server %r tool %r: possible prompt injection (%s)", sid, tool.name, ", ".join(markers))
        digest = definition_hash(tool.name, tool.description, tool.input_schema, _annotations(tool))
        pinned = self.pins.get(sid, tool.name)
        # A tool that appears on a server trusted before (a new one, or an old one renamed) is not trusted
        # by being new: like a changed one, it asks on every call until `aleph mcp trust` pins it.
        changed = (pinned is not None and pinned != digest) or (pinned is None and known)
        if pinned is None and not known:
            new_pins[tool.name] = digest
        if changed:
            conn.changed_tools.append(tool.name)
            what = "added tool" if pinned is None else "changed the definition of tool"
            log.warning(
                "MCP server %r %s %r since it was trusted; it asks for approval on every call until you run: "
                "aleph mcp trust %s %s",
                sid,
                what,
                tool.name,
                sid,
                tool.name,
            )
        ann = tool.annotations
        trust = bool(getattr(conn.raw_config, "trust_annotations", False))
        read_only = bool(ann and ann.read_only_hint)
        destructive = not read_only and (ann is None or ann.destructive_hint is None or bool(ann.destructive_hint))
        tags = ["mcp", f"mcp:{sid}"]
        if destructive:
            tags.append("destructive")
        if read_only:
            tags.append("read_only_hint")
        if changed:
            tags.append("definition_changed")
        budget = int(conn.raw_config.timeout_seconds * 1000 if conn.raw_config.timeout_seconds else 300_000) + 30_000
        facts = ToolFacts(
            idempotent=bool(trust and ann is not None and (ann.idempotent_hint or ann.read_only_hint)),
            requires_approval=changed,
            concurrent_safe=read_only,
            max_duration_ms=budget,
            tags=tuple(tags),
        )
        return _McpTool(conn, tool.name, wire, description, schema, facts)

    def _sync_server(self, conn: ServerConnection) -> None:
        """Diff the server's current tools (and template tools) against the registry and apply."""
        sid = conn.id
        source = ToolSource.mcp(sid)
        conn.quarantined, conn.changed_tools = list(conn.invalid_tools), []
        desired: dict[str, tuple[LoopTool, tuple[Any, ...]]] = {}
        inner_of: dict[str, str] = {}
        new_pins: dict[str, str] = {}
        known = self.pins.knows(sid)
        flt = conn.raw_config.tool_filter
        for tool in conn.tools:
            if flt is not None and not any(fnmatchcase(tool.name, pat) for pat in flt):
                continue
            try:
                entry = self._tool_entry(conn, tool, new_pins, known)
            except (Quarantined, ValueError) as exc:
                conn.quarantined.append({"tool": tool.name[:200], "reason": str(exc)[:300]})
                log.warning("MCP server %r: tool %r quarantined: %s", sid, tool.name, exc)
                continue
            if entry.name in desired:
                msg = (
                    f"tools {inner_of[entry.name]!r} and {tool.name!r} both map to the name {entry.name!r}; "
                    f"{tool.name!r} is refused"
                )
                conn.quarantined.append({"tool": tool.name[:200], "reason": msg})
                log.warning("MCP server %r: %s", sid, msg)
                continue
            inner_of[entry.name] = tool.name
            key = (entry.description, repr(entry.input_schema), entry.facts)
            desired[entry.name] = (entry, key)
        for template in conn.templates:
            try:
                ttool = build_template_tool(self, conn, template)
            except ValueError as exc:
                conn.quarantined.append({"tool": f"template {template.name}"[:200], "reason": str(exc)[:300]})
                continue
            if ttool.name in desired:
                conn.quarantined.append(
                    {"tool": f"template {template.name}"[:200], "reason": f"name {ttool.name!r} is already taken"}
                )
                continue
            desired[ttool.name] = (ttool, (ttool.description, repr(ttool.input_schema), ttool.facts))
        self.pins.set_many(sid, new_pins)

        current = self._registered.setdefault(sid, {})
        for name in [n for n in current if n not in desired or current[n] != desired[n][1]]:
            self.registry.unregister(name)
            del current[name]
        for name, (tool_obj, key) in desired.items():
            if name in current:
                continue
            try:
                self.registry.register(tool_obj, source=source)
            except DuplicateTool as exc:
                conn.quarantined.append({"tool": inner_of.get(name, name)[:200], "reason": str(exc)[:400]})
                log.warning("MCP server %r: %s", sid, exc)
                continue
            current[name] = key

    def trust(self, server_id: str, tool: str | None = None) -> list[str]:
        """Re-pin the current definitions of ``server_id``'s tools (all changed ones, or ``tool``).

        Returns the tool names re-pinned. The server must be connected.
        """
        conn = self.connections.get(server_id)
        if conn is None:
            raise KeyError(f"MCP server not found: {server_id}")
        if not conn.connected:
            raise RuntimeError(f"MCP server {server_id!r} is not connected (state {conn.state}: {conn.reason})")
        hashes: dict[str, str] = {}
        for t in conn.tools:
            if tool is not None and t.name != tool and wire_name(server_id, t.name) != tool:
                continue
            digest = definition_hash(t.name, t.description, t.input_schema, _annotations(t))
            if tool is not None or self.pins.get(server_id, t.name) != digest:
                hashes[t.name] = digest
        if tool is not None and not hashes:
            raise KeyError(f"MCP server {server_id!r} has no tool {tool!r}")
        self.pins.set_many(server_id, hashes)
        self._sync_server(conn)
        return sorted(hashes)

    # -- capability tools ------------------------------------------------------------------------

    def connected(self) -> list[ServerConnection]:
        """Connected servers, sorted by id."""
        return [self.connections[s] for s in sorted(self.connections) if self.connections[s].connected]

    def _wanted_capability_tools(self) -> set[str]:
        live = self.connected()
        wanted: set[str] = set()
        if any(c.resources or c.templates for c in live):
            wanted |= {"mcp_list_resources", "mcp_read_resource", "mcp_list_resource_templates"}
        if any(c.prompts for c in live):
            wanted |= {"mcp_list_prompts", "mcp_get_prompt"}
        http = [c for c in self.connections.values() if c.transport == "http" and c.raw_config.enabled]
        if any(c.connected or c.needs_auth for c in http):
            wanted.add("mcp_login")
        return wanted

    def _reconcile_capability_tools(self) -> None:
        """Make the capability-gated builtins match the live capability set (R17.6)."""
        wanted = self._wanted_capability_tools()
        for name in sorted(self._capability_tools - wanted):
            self.registry.unregister(name)
            self._capability_tools.discard(name)
        for name in sorted(wanted - self._capability_tools):
            assert name in CAPABILITY_TOOLS
            try:
                self.registry.register(build_capability_tool(self, name), source=ToolSource.builtin())
            except DuplicateTool as exc:
                log.warning("capability tool %s not offered: %s", name, exc)
                continue
            self._capability_tools.add(name)

    def find_server_prefix(self, text: str) -> tuple[ServerConnection, str] | None:
        """Split an opaque id ``{server}:{rest}`` at the first ``:`` whose prefix is a known server (R17.7)."""
        start = 0
        while True:
            idx = text.find(":", start)
            if idx < 0:
                return None
            conn = self.connections.get(text[:idx])
            if conn is not None:
                return conn, text[idx + 1 :]
            start = idx + 1

    def template_tool_name(self, server_id: str, template_name: str) -> str:
        """The typed tool name of a resource template: ``{server}__tpl_{name}`` sanitised."""
        return sanitize_name(f"{server_id}__tpl_{template_name}")
