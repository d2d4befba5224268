"""``aleph serve``: the scoped tool service as an MCP server (stdio, or Streamable HTTP on loopback).

``tools/list`` is ``await service.list()`` (a denied tool is hidden) and ``tools/call`` is
``await service.execute(...)`` (a failure comes back as an ``isError`` result carrying the message), with a
service built per request by ``rt.tool_service(channel="mcp", requester=DeferredApprovals(...))``.
Every connection is its own principal (the configured agent on channel ``mcp``, in a session of its
own): a legacy connection (or the one stdio client) gets a session key of its own, and on the
2026-07-28 HTTP era, where every POST stands alone, a call has no session at all, so no grant made
for one client ever covers another's call. A ``requestState`` is bound to the session, principal and
client it was issued to. No frame a client sends may exceed :func:`~aleph._mcp._serve_frames.frame_limit`.
Approval is asked of the client's user through form elicitation on both protocol eras (see
:mod:`aleph._mcp._serve_ask`); a client that declared no elicitation gets a refusal naming what it lacks.
While the data directory's approval inbox is offered (``[console] inbox``, see
:mod:`aleph._chokepoint._alongside`) a legacy-era approval question goes to ``aleph console`` too, the first
answer winning, and a client that cannot elicit is answered from the console instead of refused.
A tool's own questions (``CallContext.ask_human``) go to the client's user by elicitation on both eras
(see :mod:`aleph._mcp._serve_human`); they are not sent to the console inbox.
Registry changes become ``notifications/tools/list_changed`` on both eras: pushed on legacy sessions,
published on the ``subscriptions/listen`` bus for 2026-07-28 clients. Live output of a call (a shell
command's lines, an MCP server's progress) becomes ``notifications/progress`` of that call.
Resources are what families offer through ``aleph_mcp_resources`` (see :mod:`aleph._mcp._serve_resources`),
listed and read through the same scoped service.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import os
import secrets
import socket
import warnings
import weakref
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp.server import NotificationOptions, Server, ServerRequestContext
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from aleph._chokepoint._alongside import FirstAnswer, InboxRequester
from aleph._chokepoint._approval import ApprovalOutcome, ApprovalRequest, ApprovalResponse
from aleph._chokepoint._requesters import DeferredApprovals
from aleph._contract._service import panic_error
from aleph._errors import ApprovalRequired, ToolError
from aleph._human import HumanInputRequired, HumanQuestion
from aleph._mcp._oauth import is_loopback_host
from aleph._mcp._serve_ask import (
    APPROVAL_KEY,
    AskState,
    ReplayGuard,
    answer_from_elicitation,
    approval_form,
    digest,
    request_state_boundary,
)
from aleph._mcp._serve_frames import BoundedLines, frame_limit
from aleph._mcp._serve_http import transport_security
from aleph._mcp._serve_human import QUESTION_KEY, Carried, ElicitingHuman, Unreachable, input_required
from aleph._mcp._serve_log import McpLog
from aleph._mcp._serve_resources import ResourceSources
from aleph._mcp._serve_roots import ROOTS_WAIT_S, RootWorkspaces
from aleph._mcp._serve_tools import ServedTools
from aleph._progress import ToolProgressCallback, get_tool_progress_handler, set_tool_progress_handler
from aleph._turn import TurnContext

if TYPE_CHECKING:
    from aleph._runtime import Aleph

__all__ = ["APPROVAL_WAIT_S", "AlephMcpServer", "bind_loopback", "is_loopback_host"]

log = logging.getLogger("aleph.serve")

APPROVAL_WAIT_S = 300.0
"""How long a legacy elicitation prompt waits for the human before the answer is TIMEOUT."""
MAX_APPROVAL_ROUNDS = 8
"""Questions one legacy ``tools/call`` may ask (a composite tool asks once per gated sub-call)."""

_PROGRESS: contextvars.ContextVar[_ProgressSink | None] = contextvars.ContextVar("aleph_mcp_progress", default=None)


def _default_load(workspace: Path) -> Aleph:
    from aleph._runtime import load

    return load(workspace=workspace)


def _connection(ctx: ServerRequestContext[Any, Any]) -> Any:
    """The client connection a request came on (its ServerSession is built anew per request)."""
    return getattr(ctx.session, "_connection", ctx.session)


def _http_request(ctx: ServerRequestContext[Any, Any]) -> Any:
    """The HTTP request a message came in (None over stdio)."""
    request = ctx.request
    return request if getattr(request, "headers", None) is not None else None


def _client_binding(ctx: ServerRequestContext[Any, Any]) -> str:
    """What identifies the client on the wire beyond its session: its ``Authorization`` header, if any."""
    request = _http_request(ctx)
    if request is None:
        return ""
    return digest("authorization\x1f" + str(request.headers.get("authorization", "")))


def _client_can_elicit(ctx: ServerRequestContext[Any, Any]) -> bool:
    caps = ctx.session.client_capabilities
    return caps is not None and caps.elicitation is not None


def _text_result(text: str, *, error: bool) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=error)


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


class AlephMcpServer:
    """Aleph's tool service behind an MCP server. Build it over an entered runtime."""

    def __init__(
        self,
        rt: Aleph,
        *,
        channel: str = "mcp",
        agent: str | None = None,
        load: Callable[[Path], Aleph] | None = None,
    ) -> None:
        """:param load: loads the runtime for a workspace a client's MCP roots name (default ``aleph.load``)."""
        self.rt = rt
        self.channel = channel
        self.agent = agent
        self.bus = InMemorySubscriptionBus()
        self.token = secrets.token_hex(8)
        """This server's identity in approval state: state minted by another server is refused."""
        self.replay = ReplayGuard()
        # Keyed by the client connection: the SDK builds a new ServerSession for every request, so the
        # latest one of each connection is kept to push notifications on its standalone channel.
        self._legacy_sessions: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
        self._session_keys: weakref.WeakKeyDictionary[Any, dict[str, str]] = weakref.WeakKeyDictionary()
        self._connection_rt: weakref.WeakKeyDictionary[Any, Aleph] = weakref.WeakKeyDictionary()
        self.workspaces = RootWorkspaces(rt, load or _default_load)
        self._changed: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.tools = ServedTools()
        self.resources = ResourceSources()
        # Resources are advertised only when a family offers some (aleph_mcp_resources).
        offers = bool(self.resources.of(rt))
        self.mcp_log = McpLog()
        with warnings.catch_warnings():  # logging/setLevel is deprecated for 2026-07-28 only; older clients use it
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            self.server = self._server(offers)
        # Seals every outgoing requestState and verifies every incoming one before a handler sees it.
        self.server.middleware.append(request_state_boundary(rt.config.data_dir))

    def _server(self, offers: bool) -> _Server:
        return _Server(
            "aleph",
            version="0.1.0",
            instructions="Aleph's tools, checked against the user's policy before every call.",
            get_tool_input_schema=self._input_schema,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_list_resources=self._list_resources if offers else None,
            on_read_resource=self._read_resource if offers else None,
            on_subscriptions_listen=ListenHandler(self.bus),
            on_set_logging_level=self.mcp_log.set_level,
        )

    def _service(
        self, requester: Any = None, session: str | None = None, rt: Aleph | None = None, *, human: Any = None
    ) -> Any:
        # MCP clients validate and generate arguments from the schemas they list, and bring their own tool
        # search: serve full schemas, without Aleph's per-session disclosure tools. The principal is the
        # configured agent on this channel, in this connection's session (none on the 2026-07-28 HTTP era).
        turn = TurnContext(session_key=session, channel_id=self.channel) if session else None
        return (rt or self.rt).tool_service(
            agent=self.agent, channel=self.channel, turn=turn, requester=requester, discovery=False, human=human
        )

    def _remember(self, ctx: ServerRequestContext[Any, Any]) -> None:
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            self._legacy_sessions[_connection(ctx)] = ctx.session

    def _session_key(self, ctx: ServerRequestContext[Any, Any]) -> str | None:
        """The session of this connection: session grants ("approve for this session") live this long.

        A legacy connection has its own; over stdio the one client has one; on the 2026-07-28 HTTP era
        every POST stands alone (there is no session to tell two clients apart), so there is none.
        """
        modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        if modern and _http_request(ctx) is not None:
            return None
        # A session is also bound to the client's Authorization (as a 2026-07-28 requestState is): another
        # client presenting a legacy session's id gets a session of its own, never its grants.
        keys = self._session_keys.setdefault(_connection(ctx) if not modern else self, {})
        binding = _client_binding(ctx)
        if binding not in keys and len(keys) >= 8:
            return None  # a client cycling Authorization headers on one session keeps no grants at all
        return keys.setdefault(binding, f"mcp:{self.token}:{secrets.token_hex(8)}")

    async def _runtime(self, ctx: ServerRequestContext[Any, Any]) -> Aleph:
        """The runtime of this connection's workspace: its MCP roots (asked once), else the default."""
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return self.rt  # 2026-07-28 deprecates roots (SEP-2577)
        connection = _connection(ctx)
        found = self._connection_rt.get(connection)
        if found is not None:
            return found
        rt = self.rt
        caps = ctx.session.client_capabilities
        if caps is not None and caps.roots is not None:
            try:
                with anyio.fail_after(ROOTS_WAIT_S), warnings.catch_warnings():
                    warnings.simplefilter("ignore", MCPDeprecationWarning)  # deprecated for 2026-07-28 only
                    listed = await ctx.session.list_roots()
                rt = await self.workspaces.for_roots(list(listed.roots))
            except Exception as exc:
                log.warning("the client's roots could not be read (%s); serving the default workspace", exc)
        self._connection_rt[connection] = rt
        return rt

    async def _list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        self._remember(ctx)
        defs = await self._service(rt=await self._runtime(ctx)).list()
        return self.tools.listing(defs)

    def _input_schema(self, name: str) -> Mapping[str, Any] | None:
        """The schema the 2026-07-28 HTTP era checks a call's ``Mcp-Param-*`` headers against (see _serve_tools).

        That era has no roots and no session: its caller is this server's principal on the default runtime.
        """
        return self.tools.schema(self._service(rt=self.rt)._cached_list(), name)

    async def _list_resources(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        self._remember(ctx)
        rt = await self._runtime(ctx)
        return await self.resources.list(rt, self._service(session=self._session_key(ctx), rt=rt))

    async def _read_resource(
        self, ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        self._remember(ctx)
        rt = await self._runtime(ctx)
        return await self.resources.read(rt, self._service(session=self._session_key(ctx), rt=rt), str(params.uri))

    async def _call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        self._remember(ctx)
        arguments: Mapping[str, Any] = params.arguments or {}
        session = self._session_key(ctx)
        modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        can_elicit = _client_can_elicit(ctx)
        carried = Carried()
        rt = await self._runtime(ctx)
        who = self._principal_digest(session, rt)
        if modern and params.request_state is not None:
            problem = self._take_answer(AskState.load(params.request_state), (session, who, ctx), params, carried)
            if problem is not None:
                return _text_result(f"the answer for tool {params.name} was not accepted: {problem}", error=True)
        # Legacy: one set of answers for the whole call, and questions asked while it waits.
        answers = carried.approvals()
        human: Any = ElicitingHuman(params.name, ctx, can_elicit)
        for _ in range(MAX_APPROVAL_ROUNDS):
            if modern:  # every run starts from what earlier rounds settled
                answers = carried.approvals()
                human = carried.human(params.name) if can_elicit else Unreachable(params.name)
            pending: ApprovalRequest | HumanQuestion
            try:
                return await self._run(ctx, params.name, arguments, (answers, human), session, rt)
            except ApprovalRequired as exc:
                pending = exc.request
            except HumanInputRequired as exc:  # only a 2026-07-28 run defers a question
                pending = exc.question
            if isinstance(pending, ApprovalRequest) and not can_elicit:
                if not rt.inbox.offered():
                    return _text_result(_no_elicitation(pending), error=True)
                # The client cannot ask its user, but a console on this data directory can be asked.
                response = await rt.inbox.ask(pending, self._service(None, session, rt).principal)
                answers.answer(pending.fingerprint, response)
                carried.granted[pending.fingerprint] = response  # a 2026-07-28 run starts from what was settled
                continue
            if modern:
                # 2026-07-28: never wait inside a round; the client asks its user and retries with the answer.
                return input_required(pending, carried, (session, who, _client_binding(ctx)))
            assert isinstance(pending, ApprovalRequest)  # a legacy question is asked while the call waits
            answers.answer(pending.fingerprint, await self._ask_legacy(ctx, pending, session, rt))
        return _text_result(f"tool {params.name} asked for approval more than {MAX_APPROVAL_ROUNDS} times", error=True)

    def _principal_digest(self, session: str | None, rt: Aleph) -> str:
        """A digest of the principal a call of this connection runs as (what a requestState is bound to).

        The principal follows from the configured agent, the channel and the session; the runtime (the
        workspace a client's roots chose) is part of it too.
        """
        return digest(f"{self.token}\x1d{id(rt)}\x1d{self.agent or ''}\x1d{self.channel}\x1d{session or ''}")

    def _take_answer(
        self,
        state: AskState | None,
        asker: tuple[str | None, str, ServerRequestContext[Any, Any]],
        params: types.CallToolRequestParams,
        carried: Carried,
    ) -> str | None:
        """Accept the client's answer to a question this server asked this session and client; else say why not."""
        session, who, ctx = asker
        if state is None:
            return "the requestState is not one this server issued"
        if state.session != (session or "") or state.principal != who or state.client != _client_binding(ctx):
            return "the question was asked by another server or session; call the tool again to be asked anew"
        answer = (params.input_responses or {}).get(QUESTION_KEY if state.question else APPROVAL_KEY)
        if answer is None:
            return f"the retry carries no answer to the {'question' if state.question else 'approval question'}"
        if not self.replay.first_use(state.nonce):
            return "this answer was already used; call the tool again to be asked anew"
        carried.take(state, answer)
        return None

    async def _ask_legacy(
        self, ctx: ServerRequestContext[Any, Any], request: ApprovalRequest, session: str | None, rt: Aleph
    ) -> ApprovalResponse:
        """Ask the client's user, and the console's inbox alongside when it is offered: the first answer wins."""
        if not rt.inbox.offered():
            return await self._elicit_legacy(ctx, request)
        client = _Asker(lambda r: self._elicit_legacy(ctx, r))
        inbox = InboxRequester(rt.inbox, self._service(None, session, rt).principal)
        return await FirstAnswer((client, inbox)).request_approval(request)

    async def _elicit_legacy(self, ctx: ServerRequestContext[Any, Any], request: ApprovalRequest) -> ApprovalResponse:
        """Ask through ``elicitation/create`` while this call waits (legacy sessions only)."""
        message, schema, offered = approval_form(request)
        try:
            with anyio.fail_after(APPROVAL_WAIT_S):
                result = await ctx.session.elicit_form(message, schema, related_request_id=ctx.request_id)
        except TimeoutError:
            return ApprovalResponse(ApprovalOutcome.TIMEOUT)
        except Exception as exc:
            log.warning("elicitation failed: %s", exc)
            return ApprovalResponse(ApprovalOutcome.UNAVAILABLE, f"the client's elicitation failed: {exc}")
        return answer_from_elicitation(result, offered)

    async def _run(
        self,
        ctx: ServerRequestContext[Any, Any],
        name: str,
        arguments: Mapping[str, Any],
        askers: tuple[DeferredApprovals, Any],
        session: str | None,
        rt: Aleph,
    ) -> types.CallToolResult:
        """Execute once, streaming progress; raises a pending question, any other failure is an error result."""
        sink = _ProgressSink()
        sink_token = _PROGRESS.set(sink)
        result: types.CallToolResult | None = None
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
                    service = self._service(askers[0], session, rt, human=askers[1])
                    await self.mcp_log.decision(ctx, service, name, arguments)
                    output = await service.execute(name, arguments)
                    result = _text_result(output.text, error=False)
                except (ApprovalRequired, HumanInputRequired):
                    raise
                except ToolError as exc:
                    result = _text_result(str(exc), error=True)
                    await self.mcp_log.failure(ctx, name, exc)
                except Exception as exc:
                    result = _text_result(str(panic_error(name, exc)), error=True)
                    await self.mcp_log.failure(ctx, name, exc)
                finally:
                    await anyio.sleep(0)  # let already-queued chunks reach the stream before it closes
                    sink.loop.call_soon(sink.send.close)
        except BaseExceptionGroup as group:
            # The task group wraps what the body raised; a pending question is control flow, not a failure.
            required = next((e for e in group.exceptions if isinstance(e, ApprovalRequired | HumanInputRequired)), None)
            if required is not None:
                raise required from None
            raise
        finally:
            _PROGRESS.reset(sink_token)
        assert result is not None
        return result

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
            for connection, session in list(self._legacy_sessions.items()):
                try:
                    await session.send_tool_list_changed()
                except Exception:
                    self._legacy_sessions.pop(connection, None)

    async def _serve(self, body: Callable[[], Any]) -> None:
        self._loop = asyncio.get_running_loop()
        self._changed = asyncio.Event()
        unsubscribe = self.rt.registry.subscribe(self._on_registry_change)
        self.workspaces.subscribers.append(lambda rt: rt.registry.subscribe(self._on_registry_change))
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
            await self.workspaces.aclose()

    async def run_stdio(self, wire_in: IO[bytes] | None = None, wire_out: IO[bytes] | None = None) -> None:
        """Serve one client over stdin/stdout (or the given binary streams) until it disconnects."""
        from io import TextIOWrapper

        from mcp.server.stdio import stdio_server

        limit = frame_limit(self.rt.config.tools.max_input_bytes)
        restore: int | None = None
        if wire_in is None:
            # Read fd 0 through a private descriptor, and point fd 0 at the null device while serving so
            # that tools and their children never read the wire (what the SDK does for its own reader).
            private = os.dup(0)
            null = os.open(os.devnull, os.O_RDONLY)
            restore = os.dup(0)
            os.dup2(null, 0)
            os.close(null)
            wire_in = os.fdopen(private, "rb")
        stdin: Any = BoundedLines(wire_in, limit)
        stdout = anyio.wrap_file(TextIOWrapper(wire_out, encoding="utf-8")) if wire_out else None

        async def body() -> None:
            async with stdio_server(stdin, stdout) as (read, write):
                await self.server.run(read, write, self.server.create_initialization_options())

        try:
            await self._serve(body)
        finally:
            if restore is not None:
                os.dup2(restore, 0)
                os.close(restore)

    async def run_http(self, sock: socket.socket, *, ready: Callable[[int], None] | None = None) -> None:
        """Serve Streamable HTTP at ``http://host:port/mcp`` on a bound loopback socket until cancelled."""
        host = sock.getsockname()[0]
        if not is_loopback_host(host):
            raise ValueError(f"refusing to serve on {host!r}: aleph serve binds loopback addresses only")
        import uvicorn

        app = self.server.streamable_http_app(
            host=host,
            max_request_body_size=frame_limit(self.rt.config.tools.max_input_bytes),
            transport_security=transport_security(host),
        )
        config = uvicorn.Config(app, log_level="warning", lifespan="on")
        server = uvicorn.Server(config)

        async def body() -> None:
            async with anyio.create_task_group() as tg:
                tg.start_soon(lambda: server.serve(sockets=[sock]))
                while not server.started:
                    await anyio.sleep(0.02)
                if ready is not None:
                    ready(sock.getsockname()[1])
                await anyio.sleep_forever()

        await self._serve(body)


class _Asker:
    """A function of the request as an approval requester."""

    def __init__(self, ask: Callable[[ApprovalRequest], Awaitable[ApprovalResponse]]) -> None:
        self.ask = ask

    async def request_approval(self, request: ApprovalRequest) -> ApprovalResponse:
        return await self.ask(request)


def bind_loopback(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (raises OSError, e.g. the address is in use)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # Naming IPPROTO_TCP matters: asyncio sets TCP_NODELAY only on sockets whose proto says TCP, and accepted
    # sockets inherit the listener's proto; with proto 0 a response written in two parts waited for the
    # client's delayed ACK (Nagle), ~40 ms on every modern-era tools/call.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except BaseException:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def _no_elicitation(request: ApprovalRequest) -> str:
    return (
        f"tool {request.tool_name} needs a human's approval ({request.reason}), and this MCP client cannot ask "
        "one: it did not declare the elicitation capability, so nobody can be asked and the call did not run. "
        "Use an MCP client that supports elicitation to approve it, or allow it in aleph.toml "
        f"(see: aleph policy explain {request.tool_name})."
    )
