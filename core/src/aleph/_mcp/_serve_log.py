"""MCP logging for ``aleph serve``: each call's decision and any error, as ``notifications/message``.

Handshake-era clients (2025-11-25 and before) choose a minimum level per connection with
``logging/setLevel``; nothing is sent to a connection before it asks, since a log it did not ask for is noise
in its user's view. From 2026-07-28 a client opts in per request (the ``io.modelcontextprotocol/logLevel``
``_meta`` key) and the SDK drops what is below it; the server reads that set to skip work nobody receives.
A decision is logged at ``info``, a refusal at ``warning`` and a failure at ``error``.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Mapping
from typing import Any

from mcp import types
from mcp.server.context import ServerRequestContext
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from aleph._errors import ApprovalDenied, ApprovalExpired, ApprovalUnavailable, PermissionDenied, ToolError

__all__ = ["LEVELS", "McpLog"]

log = logging.getLogger("aleph.serve")

LEVELS: tuple[str, ...] = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
"""The syslog levels MCP uses, least severe first."""

LOGGER = "aleph.chokepoint"
"""The ``logger`` field of every notification this server sends."""

_REFUSALS = (PermissionDenied, ApprovalDenied, ApprovalExpired, ApprovalUnavailable)


def _connection(ctx: ServerRequestContext[Any, Any]) -> Any:
    return getattr(ctx.session, "_connection", ctx.session)


class McpLog:
    """Per-connection minimum levels and the notifications sent for one ``tools/call``."""

    def __init__(self) -> None:
        self._levels: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()

    async def set_level(
        self, ctx: ServerRequestContext[Any, Any], params: types.SetLevelRequestParams
    ) -> types.EmptyResult:
        """``logging/setLevel``: this connection's minimum level from now on."""
        self._levels[_connection(ctx)] = str(params.level)
        return types.EmptyResult()

    def wants(self, ctx: ServerRequestContext[Any, Any], level: str) -> bool:
        """Whether a notification at ``level`` reaches this request's client."""
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            allowed = getattr(ctx.session, "_allowed_log_levels", None)  # the request's opt-in, read by the SDK
            return allowed is None or level in allowed
        floor = self._levels.get(_connection(ctx))
        return floor is not None and LEVELS.index(level) >= LEVELS.index(floor)

    async def send(self, ctx: ServerRequestContext[Any, Any], level: str, data: Mapping[str, Any]) -> None:
        """Send one notification if the client wants it; a client gone away is not the call's failure."""
        if not self.wants(ctx, level):
            return
        try:
            await ctx.session.send_log_message(level, dict(data), logger=LOGGER, related_request_id=ctx.request_id)  # type: ignore[arg-type]
        except Exception as exc:
            log.debug("log notification not delivered: %s", exc)

    async def decision(self, ctx: ServerRequestContext[Any, Any], service: Any, name: str, arguments: Any) -> None:
        """Log what the chokepoint decides for this call (at ``info``), before it runs."""
        if not self.wants(ctx, "info"):
            return
        try:
            why = service.explain(name, arguments)
        except Exception as exc:  # an unknown tool or bad input: the call's own answer says so
            log.debug("no explanation for %s: %s", name, exc)
            return
        await self.send(
            ctx,
            "info",
            {
                "event": "decision",
                "tool": name,
                "decision": why.decision,
                "rule_id": why.rule_id,
                "rule": why.rule,
                "layer": why.layer,
                "reason": why.reason,
            },
        )

    async def failure(self, ctx: ServerRequestContext[Any, Any], name: str, exc: BaseException) -> None:
        """Log a refusal at ``warning``, any other failure at ``error``."""
        refused = isinstance(exc, _REFUSALS)
        level = "warning" if refused else "error"
        kind = exc.kind if isinstance(exc, ToolError) else type(exc).__name__
        await self.send(
            ctx,
            level,
            {"event": "refused" if refused else "error", "tool": name, "error": kind, "message": str(exc)[:2000]},
        )
