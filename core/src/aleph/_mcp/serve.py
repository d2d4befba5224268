"""``aleph serve``: the scoped tool service as an MCP server (stdio, or Streamable HTTP on loopback).

``tools/list`` is ``await service.list()`` (a denied tool is hidden) and ``tools/call`` is
``await service.call(...)`` (a failure comes back as an ``isError`` result carrying the message), with a
service built per request by ``rt.tool_service(channel="mcp", requester=...)``. Approval prompts go to
the connected client through form elicitation when it supports it; otherwise the requester answers
``UNAVAILABLE`` and the chokepoint refuses with that reason. Registry changes become
``notifications/tools/list_changed`` on both protocol eras: pushed on legacy sessions, published on the
``subscriptions/listen`` bus for 2026-07-28 clients.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp.server import NotificationOptions, Server, ServerRequestContext
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from aleph._approval import ApprovalDecision, ApprovalOutcome, ApprovalRequest, ApprovalResponse
from aleph._mcp._oauth import is_loopback_host
from aleph._progress import ToolProgressCallback, get_tool_progress_handler, set_tool_progress_handler
from aleph._types import ToolDefinition

if TYPE_CHECKING:
    from aleph._runtime import Aleph

__all__ = ["AlephMcpServer", "ElicitationApprovalRequester", "is_loopback_host"]

log = logging.getLogger("aleph.serve")

APPROVAL_WAIT_S = 300.0
"""How long an elicitation prompt waits for the human before the answer is TIMEOUT."""

_REQUEST: contextvars.ContextVar[ServerRequestContext[Any, Any] | None] = contextvars.ContextVar(
    "aleph_mcp_request", default=None
)
_PROGRESS: contextvars.ContextVar[_ProgressSink | None] = contextvars.ContextVar("aleph_mcp_progress", default=None)


def _supports_form_elicitation(ctx: ServerRequestContext[Any, Any]) -> bool:
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        # 2026-07-28 turns elicitation into a multi-round-trip result; a blocking prompt cannot use it.
        return False
    caps = ctx.session.client_capabilities
    return caps is not None and caps.elicitation is not None


_CHOICES = {
    "approve_once": ApprovalOutcome.APPROVED,
    "approve_for_session": ApprovalOutcome.APPROVED_FOR_SESSION,
    "approve_always": ApprovalOutcome.APPROVED_ALWAYS,
    "deny": ApprovalOutcome.DENIED,
}
_OFFERED = {
    ApprovalDecision.ALLOW_ONCE: "approve_once",
    ApprovalDecision.ALLOW_SESSION: "approve_for_session",
    ApprovalDecision.ALLOW_ALWAYS: "approve_always",
    ApprovalDecision.DENY: "deny",
}


class ElicitationApprovalRequester:
    """An ``ApprovalRequester`` that asks the connected MCP client through a form elicitation.

    Outside a request, on a 2026-07-28 connection, or with a client that did not declare elicitation,
    the answer is ``UNAVAILABLE`` (never "allow").
    """

    async def request_approval(self, request: ApprovalRequest) -> ApprovalResponse:
        """Ask the client; map accept/decline/cancel onto approval outcomes."""
        ctx = _REQUEST.get()
        if ctx is None or not _supports_form_elicitation(ctx):
            return ApprovalResponse(ApprovalOutcome.UNAVAILABLE)
        offered = [_OFFERED[d] for d in request.allowed_decisions if d in _OFFERED] or ["approve_once", "deny"]
        if "deny" not in offered:
            offered.append("deny")
        schema: dict[str, Any] = {
            "type": "object",
            "properties": {
                "decision": {"type": "string", "enum": offered, "title": "Decision", "description": "Your answer."},
                "reason": {"type": "string", "title": "Reason", "description": "Why (optional)."},
            },
            "required": ["decision"],
        }
        message = (f"Aleph asks: allow the tool {request.tool_name}?\n{request.summary}\nReason: {request.reason}")[
            :4000
        ]
        try:
            with anyio.fail_after(APPROVAL_WAIT_S):
                result = await ctx.session.elicit_form(message, schema, related_request_id=ctx.request_id)
        except TimeoutError:
            return ApprovalResponse(ApprovalOutcome.TIMEOUT)
        except Exception as exc:
            log.warning("elicitation failed: %s", exc)
            return ApprovalResponse(ApprovalOutcome.UNAVAILABLE)
        if result.action != "accept":
            return ApprovalResponse(ApprovalOutcome.DENIED, deny_reason=f"the user chose {result.action}")
        content = result.content or {}
        choice = content.get("decision")
        outcome = _CHOICES.get(choice) if isinstance(choice, str) and choice in offered else None
        if outcome is None:
            return ApprovalResponse(ApprovalOutcome.DENIED, deny_reason="the answer was not one of the offered choices")
        reason = content.get("reason")
        return ApprovalResponse(outcome, deny_reason=str(reason)[:500] if reason and not outcome.is_approved else None)


class _ProgressSink:
    """Carries streaming chunks of one call to its request as progress notifications (thread-safe)."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.send, self.receive = anyio.create_memory_object_stream[str](256)

    def push(self, chunk: str) -> None:
        def put() -> None:
            try:
                self.send.send_nowait(chunk[:2000])
            except (anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):
                pass  # progress is best-effort; a flood is dropped, never blocks the tool

        self.loop.call_soon_threadsafe(put)


class _ServeProgress:
    """Process-wide progress handler while serving: routes chunks to the calling request, chains the previous."""

    def __init__(self, previous: ToolProgressCallback | None) -> None:
        self.previous = previous

    def on_tool_start(self, tool_name: str, args_summary: str) -> None:
        if self.previous is not None:
            self.previous.on_tool_start(tool_name, args_summary)

    def on_tool_result(self, tool_name: str, result_summary: str, success: bool) -> None:
        if self.previous is not None:
            self.previous.on_tool_result(tool_name, result_summary, success)

    def on_tool_streaming_chunk(self, tool_name: str, chunk: str) -> None:
        sink = _PROGRESS.get()
        if sink is not None:
            sink.push(chunk)
        if self.previous is not None:
            self.previous.on_tool_streaming_chunk(tool_name, chunk)


class _Server(Server[Any]):
    """The low-level server, advertising ``tools.listChanged`` on the legacy handshake too."""

    def create_initialization_options(self, notification_options: Any = None, *args: Any, **kwargs: Any) -> Any:
        return super().create_initialization_options(
            notification_options or NotificationOptions(tools_changed=True), *args, **kwargs
        )


def _tool(defn: ToolDefinition) -> types.Tool:
    tags = defn.facts.tags
    return types.Tool(
        name=defn.name,
        description=defn.description,
        input_schema=defn.input_schema,
        annotations=types.ToolAnnotations(
            idempotent_hint=defn.facts.idempotent,
            destructive_hint="destructive" in tags or not defn.facts.idempotent,
        ),
    )


class AlephMcpServer:
    """Aleph's tool service behind an MCP server. Build it over an entered runtime."""

    def __init__(self, rt: Aleph, *, channel: str = "mcp", agent: str | None = None) -> None:
        self.rt = rt
        self.channel = channel
        self.agent = agent
        self.requester = ElicitationApprovalRequester()
        self.bus = InMemorySubscriptionBus()
        self._legacy_sessions: weakref.WeakSet[Any] = weakref.WeakSet()
        self._changed: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.server = _Server(
            "aleph",
            version="0.1.0",
            instructions="Aleph's tools, checked against the user's policy before every call.",
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_subscriptions_listen=ListenHandler(self.bus),
        )

    def _service(self) -> Any:
        # MCP clients validate and generate arguments from the schemas they list, and bring their own tool
        # search: serve full schemas, without Aleph's per-session disclosure tools.
        return self.rt.tool_service(agent=self.agent, channel=self.channel, requester=self.requester, discovery=False)

    def _remember(self, ctx: ServerRequestContext[Any, Any]) -> None:
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            self._legacy_sessions.add(ctx.session)

    async def _list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        self._remember(ctx)
        defs = await self._service().list()
        return types.ListToolsResult(tools=[_tool(d) for d in defs])

    async def _call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        self._remember(ctx)
        arguments: Mapping[str, Any] = params.arguments or {}
        sink = _ProgressSink()
        req_token = _REQUEST.set(ctx)
        sink_token = _PROGRESS.set(sink)
        try:
            async with anyio.create_task_group() as tg:

                async def forward() -> None:
                    count = 0
                    async with sink.receive:
                        async for chunk in sink.receive:
                            count += 1
                            try:
                                await ctx.session.report_progress(count, None, chunk)
                            except Exception as exc:
                                log.debug("progress not delivered: %s", exc)

                tg.start_soon(forward)
                try:
                    result = await self._service().call(params.name, arguments)
                finally:
                    await anyio.sleep(0)  # let already-queued chunks reach the stream before it closes
                    sink.loop.call_soon(sink.send.close)
        finally:
            _PROGRESS.reset(sink_token)
            _REQUEST.reset(req_token)
        text = (result.output if result.success else result.error) or ""
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=not result.success)

    # -- list_changed fan-out --------------------------------------------------------------------

    def _on_registry_change(self, _registry: Any) -> None:
        loop, event = self._loop, self._changed
        if loop is not None and event is not None:
            loop.call_soon_threadsafe(event.set)

    async def _notifier(self) -> None:
        assert self._changed is not None
        while True:
            await self._changed.wait()
            await anyio.sleep(0.05)  # coalesce a burst (a server re-registering many tools) into one notification
            self._changed.clear()
            await self.bus.publish(ToolsListChanged())
            for session in list(self._legacy_sessions):
                try:
                    await session.send_tool_list_changed()
                except Exception:
                    self._legacy_sessions.discard(session)

    async def _run(self, body: Any) -> None:
        self._loop = asyncio.get_running_loop()
        self._changed = asyncio.Event()
        unsubscribe = self.rt.registry.subscribe(self._on_registry_change)
        previous = get_tool_progress_handler()
        set_tool_progress_handler(_ServeProgress(previous))
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._notifier)
                await body()
                tg.cancel_scope.cancel()
        finally:
            set_tool_progress_handler(previous)
            unsubscribe()

    async def run_stdio(self) -> None:
        """Serve one client over stdin/stdout until it disconnects."""
        from mcp.server.stdio import stdio_server

        async def body() -> None:
            async with stdio_server() as (read, write):
                await self.server.run(read, write, self.server.create_initialization_options())

        await self._run(body)

    async def run_http(self, host: str = "127.0.0.1", port: int = 8765, *, ready: Any = None) -> None:
        """Serve Streamable HTTP at ``http://host:port/mcp`` (loopback only) until cancelled."""
        if not is_loopback_host(host):
            raise ValueError(f"refusing to serve on {host!r}: aleph serve binds loopback addresses only")
        import uvicorn

        app = self.server.streamable_http_app(host=host)
        config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
        server = uvicorn.Server(config)

        async def body() -> None:
            async with anyio.create_task_group() as tg:
                tg.start_soon(server.serve)
                while not server.started:
                    await anyio.sleep(0.02)
                if ready is not None:
                    ready(server)
                await anyio.sleep_forever()

        await self._run(body)
