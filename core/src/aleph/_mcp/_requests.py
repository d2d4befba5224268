"""Requests to one MCP server: tool calls with idle and budget deadlines, resources and prompts, errors mapped.

A mixin of :class:`~aleph._mcp._server.ServerConnection` (reads the connection's fields).
"""

from __future__ import annotations

import contextvars
import json
import math
from collections.abc import Mapping
from typing import Any

import anyio
from mcp import Client
from mcp.shared.exceptions import MCPError

from aleph._config import McpServerConfig
from aleph._contract._types import ToolOutput
from aleph._errors import ExecutionFailed, ToolError, ToolNotFound, ToolTimeout, TransportError, ValidationFailed
from aleph._mcp._content import render_content, resource_item
from aleph._mcp._hygiene import cap_text
from aleph._progress import notify_tool_streaming_chunk

__all__ = ["TRANSPORT_ERRORS", "Requests", "contains", "describe"]

TRANSPORT_ERRORS: tuple[type[BaseException], ...] = (
    anyio.ClosedResourceError,
    anyio.BrokenResourceError,
    anyio.EndOfStream,
    ConnectionError,
    OSError,
)


def describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(describe(e) for e in exc.exceptions[:3])
    if isinstance(exc, MCPError):
        return f"MCP error {exc.code}: {exc.message}"[:500]
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:500]


def contains(exc: BaseException, kinds: tuple[type[BaseException], ...]) -> bool:
    if isinstance(exc, BaseExceptionGroup):
        return any(contains(e, kinds) for e in exc.exceptions)
    return isinstance(exc, kinds)


class Requests:
    """The request half of a server connection."""

    id: str
    client: Client | None
    config: McpServerConfig
    state: str
    reason: str | None
    _deadlines: dict[anyio.CancelScope, float]

    @property
    def connected(self) -> bool:
        """The server answers requests (possibly degraded)."""
        return self.client is not None and self.state in ("connected", "degraded")

    def wake(self) -> None:
        """Probe health now (a call saw a transport error); the connection's supervisor implements it."""
        raise NotImplementedError

    def require_client(self, tool: str) -> Client:
        """The live client, or a :class:`TransportError` saying why there is none."""
        client = self.client
        if client is None or not self.connected:
            why = f" ({self.reason})" if self.reason else ""
            raise TransportError(tool, f"MCP server {self.id!r} is not connected: state {self.state}{why}")
        return client

    def _map_error(self, tool: str, exc: BaseException) -> ToolError:
        if isinstance(exc, ToolError):
            return exc
        if isinstance(exc, MCPError):
            text = cap_text(exc.message, 2000)
            if exc.code == -32602 and ("unknown tool" in text.lower() or "not found" in text.lower()):
                return ToolNotFound(tool)
            if exc.code == -32602:
                return ValidationFailed(tool, f"the MCP server refused the arguments: {text}")
            if exc.code in (-32001,):
                return ToolTimeout(tool, 0)
            if exc.code == -32000:
                self.wake()
                return TransportError(tool, f"MCP server {self.id!r}: {text}")
            return ExecutionFailed(tool, f"MCP error {exc.code}: {text}")
        if isinstance(exc, TimeoutError):
            return ToolTimeout(tool, 0)
        if contains(exc, TRANSPORT_ERRORS):
            self.wake()
            return TransportError(tool, f"MCP server {self.id!r}: {describe(exc)}")
        return ExecutionFailed(tool, describe(exc))

    async def call_tool(self, wire: str, inner: str, arguments: Mapping[str, Any], budget_s: float) -> ToolOutput:
        """Call ``inner`` on this server for the registered tool ``wire``; errors mapped per R17.4.

        The call ends after ``timeout_seconds`` without progress (each progress report pushes that back)
        and in any case after ``budget_s``.
        """
        client = self.require_client(wire)
        idle = self.config.timeout_seconds
        start = anyio.current_time()
        hard_end = start + budget_s
        # The SDK's own read timeout is left unarmed (``inf``): the sweeper enforces the budget too.
        scope = anyio.CancelScope()
        deadlines = self._deadlines
        deadlines[scope] = min(start + idle, hard_end)
        caller = contextvars.copy_context()

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            # Progress is a liveness signal: each one pushes the idle deadline back (never past the
            # budget). The callback is passed on every call: a server only reports progress on a
            # request that carries a progress token, and a call is only known to be long once it is.
            if scope in deadlines:
                deadlines[scope] = min(anyio.current_time() + idle, hard_end)
            text = message or (f"{progress:g}/{total:g}" if total else f"{progress:g}")
            # The SDK runs this callback in its receive task; run the notification in the caller's
            # context so handlers that route by context (``aleph serve``) find the calling request.
            caller.run(notify_tool_streaming_chunk, wire, cap_text(text, 2000))

        try:
            with scope:
                result = await client.call_tool(
                    inner, dict(arguments), read_timeout_seconds=math.inf, progress_callback=on_progress
                )
        except Exception as exc:
            raise self._map_error(wire, exc) from None
        finally:
            del deadlines[scope]
        if scope.cancelled_caught:
            raise ToolTimeout(wire, int((anyio.current_time() - start) * 1000))
        text = render_content(result.content)
        if not text and result.structured_content is not None:
            text = json.dumps(result.structured_content, ensure_ascii=False, default=str)
        if result.is_error:
            raise ExecutionFailed(wire, cap_text(text, 4000) or "MCP tool returned failure without message")
        return ToolOutput(cap_text(text), metadata={"mcp_server": self.id})

    async def read_resource(self, tool: str, uri: str) -> Any:
        """Read ``uri``; returns the R17.7 output shape."""
        client = self.require_client(tool)
        try:
            with anyio.fail_after(self.config.timeout_seconds):
                result = await client.read_resource(uri)
        except Exception as exc:
            raise self._map_error(tool, exc) from None
        items = [resource_item(c) for c in result.contents[:100]]
        if len(items) == 1:
            return items[0]
        return {"contents": items}

    async def get_prompt(self, tool: str, name: str, arguments: Mapping[str, str]) -> dict[str, Any]:
        """Get the prompt ``name``; returns ``{description?, messages}``."""
        client = self.require_client(tool)
        try:
            with anyio.fail_after(self.config.timeout_seconds):
                result = await client.get_prompt(name, dict(arguments))
        except Exception as exc:
            raise self._map_error(tool, exc) from None
        out: dict[str, Any] = {}
        if result.description:
            out["description"] = result.description
        out["messages"] = [
            {"role": m.role, "content": cap_text(render_content([m.content]), 200_000)} for m in result.messages[:500]
        ]
        return out
