"""One configured MCP server: its connection, supervision (health, bounded restarts) and live lists.

A :class:`ServerConnection` owns one long-running supervisor task. Inside it, the SDK ``Client``
is entered and exited in the same task (anyio cancel scopes require that); other tasks only send
requests through it. Change notifications arrive on two paths (R17.5, ENV.md): the legacy
``message_handler`` and, on 2026-07-28 connections, a ``subscriptions/listen`` stream held open by a
background task. Both only mark lists dirty; one refresher task re-lists and hands the result to the
manager, so a burst of notifications costs one re-list.
"""

from __future__ import annotations

import base64
import contextlib
import contextvars
import json
import logging
import math
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal

import anyio
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.subscriptions import (
    ListenNotSupportedError,
    PromptsListChanged,
    ResourcesListChanged,
    SubscriptionLost,
    ToolsListChanged,
)
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from aleph._config import McpServerConfig
from aleph._contract._types import ToolOutput
from aleph._errors import ExecutionFailed, ToolError, ToolNotFound, ToolTimeout, TransportError, ValidationFailed
from aleph._mcp._chain import CHAIN_ENV, child_chain
from aleph._mcp._eof import watched_stdio
from aleph._mcp._hygiene import cap_text, expand_vars
from aleph._mcp._status import ServerStatus, State
from aleph._progress import notify_tool_streaming_chunk

if TYPE_CHECKING:
    from aleph._mcp._manager import McpManager

__all__ = ["ServerConnection", "expanded_settings"]

log = logging.getLogger("aleph.mcp")

_MAX_PAGES = 50
"""A paginating server that never stops cannot hang a listing."""
_MAX_ITEMS = 2000
"""Per list: tools, resources, templates or prompts kept from one server."""
_TRANSPORT_ERRORS: tuple[type[BaseException], ...] = (
    anyio.ClosedResourceError,
    anyio.BrokenResourceError,
    anyio.EndOfStream,
    ConnectionError,
    OSError,
)


class _RawToolPage(BaseModel):
    """A ``tools/list`` page read without per-tool validation (each tool is validated on its own)."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)
    tools: list[dict[str, Any]] = Field(default_factory=list, max_length=_MAX_ITEMS * 2)
    next_cursor: str | None = Field(default=None, alias="nextCursor")


def expanded_settings(config: McpServerConfig) -> McpServerConfig:
    """``config`` with ``${VAR}`` expanded in command, args, env, cwd, url and headers."""
    return config.model_copy(
        update={
            "command": expand_vars(config.command) if config.command else None,
            "args": [expand_vars(a) for a in config.args],
            "env": {k: expand_vars(v) for k, v in config.env.items()},
            "cwd": expand_vars(config.cwd) if config.cwd else None,
            "url": expand_vars(config.url) if config.url else None,
            "headers": {k: expand_vars(v) for k, v in config.headers.items()},
        }
    )


def _without_userinfo(url: str) -> str:
    """``url`` with any ``user:password@`` removed (never shown)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    authority, slash, path = rest.partition("/")
    return f"{scheme}://{authority.rpartition('@')[2]}{slash}{path}"


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_describe(e) for e in exc.exceptions[:3])
    if isinstance(exc, MCPError):
        return f"MCP error {exc.code}: {exc.message}"[:500]
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:500]


def _contains(exc: BaseException, kinds: tuple[type[BaseException], ...]) -> bool:
    if isinstance(exc, BaseExceptionGroup):
        return any(_contains(e, kinds) for e in exc.exceptions)
    return isinstance(exc, kinds)


class ServerConnection:
    """The supervised connection to one configured MCP server."""

    def __init__(self, server_id: str, config: McpServerConfig, manager: McpManager) -> None:
        self.id = server_id
        self.raw_config = config
        self.config = expanded_settings(config)
        self.manager = manager
        self.transport: Literal["stdio", "http"] = "http" if config.url else "stdio"
        self.state: State = "connecting" if config.enabled else "disabled"
        self.reason: str | None = None if config.enabled else "disabled in configuration"
        self.client: Client | None = None
        self.protocol_version: str | None = None
        self.capabilities: types.ServerCapabilities | None = None
        self.tools: list[types.Tool] = []
        self.resources: list[types.Resource] = []
        self.templates: list[types.ResourceTemplate] = []
        self.prompts: list[types.Prompt] = []
        self.restarts = 0
        self.needs_auth = False
        self.quarantined: list[dict[str, str]] = []
        self.changed_tools: list[str] = []
        self.warnings: list[str] = []
        self.invalid_tools: list[dict[str, str]] = []
        self.first_attempt = anyio.Event()
        self._restart_times: deque[float] = deque()
        self._stopping = False
        self._scope: anyio.CancelScope | None = None
        self._wake = anyio.Event()
        self._dirty: set[str] = set()
        self._dirty_event = anyio.Event()
        self._lost_reason: str | None = None
        self._ended: anyio.Event | None = None
        self._reconnect = False
        self._running = False
        self._session_auth: Any = None
        self.auth: Any = None  # an httpx2.Auth installed by mcp_login once tokens exist
        self._deadlines: dict[anyio.CancelScope, float] = {}
        """The scope of each call in flight → when it times out (idle or budget); see :meth:`_expire_calls`."""

    # -- status ------------------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        """The server answers requests (possibly degraded)."""
        return self.client is not None and self.state in ("connected", "degraded")

    def capability_names(self) -> list[str]:
        """Advertised capabilities as short labels (``tools``, ``tools.listChanged``, ...)."""
        caps = self.capabilities
        if caps is None:
            return []
        out: list[str] = []
        for name in ("tools", "resources", "prompts"):
            cap = getattr(caps, name)
            if cap is not None:
                out.append(name)
                if getattr(cap, "list_changed", False):
                    out.append(f"{name}.listChanged")
        if caps.resources is not None and caps.resources.subscribe:
            out.append("resources.subscribe")
        for name in ("logging", "completions"):
            if getattr(caps, name) is not None:
                out.append(name)
        return out

    def status(self) -> ServerStatus:
        """A snapshot for ``aleph mcp list``; secrets (env values, headers) are never part of it."""
        target = _without_userinfo(self.raw_config.url) if self.raw_config.url else ""
        target = target or " ".join([self.raw_config.command or "", *self.raw_config.args]).strip()
        return ServerStatus(
            id=self.id,
            transport=self.transport,
            state=self.state,
            reason=self.reason,
            protocol_version=self.protocol_version,
            capabilities=self.capability_names(),
            tools=len(self.tools),
            resources=len(self.resources),
            templates=len(self.templates),
            prompts=len(self.prompts),
            restarts=self.restarts,
            quarantined=list(self.quarantined),
            changed_tools=list(self.changed_tools),
            warnings=list(self.warnings),
            target=target[:300],
        )

    # -- supervision ---------------------------------------------------------------------------

    def stop(self) -> None:
        """Ask the supervisor to end; the current connection is cancelled."""
        self._stopping = True
        self._wake.set()
        if self._scope is not None:
            self._scope.cancel()

    @property
    def stopping(self) -> bool:
        """:meth:`stop` was called."""
        return self._stopping

    def request_reconnect(self) -> None:
        """Drop the current connection and connect again at once (after a login), outside the restart budget."""
        self._reconnect = True
        self._wake.set()

    @property
    def running(self) -> bool:
        """The supervisor task is alive."""
        return self._running

    def wake(self) -> None:
        """Probe health now (a call saw a transport error)."""
        self._wake.set()

    async def supervise(self) -> None:
        """Connect, serve, and restart within the budget until stopped or dead."""
        policy = self.manager.policy
        first = not self.restarts
        self._running = True
        try:
            await self._supervise(policy, first)
        finally:
            self._running = False
            self.first_attempt.set()

    async def _supervise(self, policy: Any, first: bool) -> None:
        while not self._stopping:
            self.state = "connecting" if first else "restarting"
            self._lost_reason = None
            try:
                await self._session()
                reason = self._lost_reason or "connection closed"
            except Exception as exc:
                reason = _describe(exc)
                self.needs_auth = self.transport == "http" and await self._wants_oauth()
                if self.needs_auth:
                    reason += " (the server wants OAuth: run the mcp_login tool)"
            self.client = None
            if self.stopping:
                break
            if self._reconnect:
                self._reconnect = False
                self.manager.server_lost(self)
                continue
            log.warning("MCP server %r: %s", self.id, reason)
            self.reason = reason
            self.manager.server_lost(self)
            if first:
                first = False
                self.first_attempt.set()
            now = time.monotonic()
            while self._restart_times and now - self._restart_times[0] > policy.restart_window:
                self._restart_times.popleft()
            if len(self._restart_times) >= policy.max_restarts:
                self.state = "dead"
                self.reason = f"{reason} — gave up after {policy.max_restarts} restarts in {policy.restart_window:g}s"
                log.error("MCP server %r is dead: %s", self.id, self.reason)
                self.manager.server_lost(self)
                break
            self._restart_times.append(now)
            self.restarts += 1
            self.state = "restarting"
            delay = policy.backoff_base * 2 ** (len(self._restart_times) - 1)
            with anyio.move_on_after(delay):
                await self._wake.wait()
            self._wake = anyio.Event()

    async def _wants_oauth(self) -> bool:
        """Whether the HTTP endpoint answers 401 (the SDK reports a failed connect without the status)."""
        import httpx2

        url = self.config.url
        assert url is not None
        headers = {**self.config.headers, "Accept": "application/json, text/event-stream"}
        body = {"jsonrpc": "2.0", "id": 0, "method": "ping"}
        try:
            with anyio.fail_after(min(self.config.timeout_seconds, 10.0)):
                async with httpx2.AsyncClient(follow_redirects=False) as http:
                    response = await http.post(url, json=body, headers=headers)
        except Exception:
            return False
        return response.status_code == 401

    def _http_client(self) -> Any:
        """An HTTP client carrying the configured headers and OAuth, or None when the SDK default will do."""
        cfg = self.config
        if not cfg.url:
            return None
        if self.auth is None:
            from aleph._mcp._oauth import has_tokens, oauth_provider

            if has_tokens(self.manager, self.id):
                self.auth = oauth_provider(self.manager, self.id, cfg.url)
        if not cfg.headers and self.auth is None:
            return None
        import httpx2

        return httpx2.AsyncClient(
            headers=dict(cfg.headers), auth=self.auth, timeout=httpx2.Timeout(cfg.timeout_seconds, read=300)
        )

    def _client(self, http: Any) -> Client:
        cfg = self.config
        self._ended = None
        target: Any
        if cfg.url:
            target = cfg.url
            if http is not None:
                from mcp.client.streamable_http import streamable_http_client

                target = streamable_http_client(cfg.url, http_client=http)
        elif self.id in self.manager.inprocess:
            target = self.manager.inprocess[self.id]
        else:
            assert cfg.command is not None
            env = dict(cfg.env)
            if self.manager.chain_id is not None:
                env[CHAIN_ENV] = child_chain(self.manager.chain_id)  # a configuration cannot unset it
            params = StdioServerParameters(command=cfg.command, args=list(cfg.args), env=env, cwd=cfg.cwd)
            self._ended = anyio.Event()
            target = watched_stdio(params, self._ended)
        return Client(
            target,
            mode=cfg.protocol,
            message_handler=self._on_message,
            read_timeout_seconds=cfg.timeout_seconds,
            client_info=types.Implementation(name="aleph", version="0.1.0"),
            cache=None,
        )

    async def _session(self) -> None:
        timeout = self.config.timeout_seconds
        self._reconnect = False  # this attempt is the reconnect that was asked for
        with anyio.CancelScope() as scope:
            self._scope = scope
            scope.deadline = anyio.current_time() + timeout
            http = self._http_client()
            self._session_auth = self.auth
            # The SDK does not close an HTTP client it was given: this block owns it.
            async with (
                http if http is not None else contextlib.nullcontext(),
                self._client(http) as client,
                anyio.create_task_group() as tg,
            ):
                tg.start_soon(self._expire_calls)
                if self._ended is not None:
                    tg.start_soon(self._watch_eof, self._ended, scope)
                self.client = client
                self.protocol_version = client.protocol_version
                self.capabilities = client.server_capabilities
                if self._wants_listen():
                    # Subscribe before the first listing, so no change between the two is missed.
                    await tg.start(self._listener)
                await self._relist({"tools", "resources", "prompts"})
                scope.deadline = math.inf
                self.state = "connected"
                self.reason = None
                self.needs_auth = False
                self.manager.server_ready(self)
                self.first_attempt.set()
                tg.start_soon(self._refresher)
                await self._health_loop()
                tg.cancel_scope.cancel()
        self._scope = None
        if scope.cancelled_caught and not self._stopping and self.state in ("connecting", "restarting"):
            raise TimeoutError(f"no answer within {timeout:g}s (connect and first listing)")

    async def _watch_eof(self, ended: anyio.Event, scope: anyio.CancelScope) -> None:
        """End the session the moment a stdio server's output ends (it exited or was killed)."""
        await ended.wait()
        if not self._stopping:
            self._lost_reason = "the server's output ended (it exited or was killed)"
            scope.cancel()

    async def _expire_calls(self) -> None:
        """Cancel the calls whose idle timeout or budget has passed, checking every tenth of the timeout.

        One sweeper per connection instead of a timer per call: arming and cancelling a timer on
        every call is a measurable share of Aleph's per-call overhead. A call ends at most a tenth of
        ``timeout_seconds`` (and at most 1 s) after its deadline.
        """
        tick = min(max(self.config.timeout_seconds / 10, 0.01), 1.0)
        while True:
            await anyio.sleep(tick)
            now = anyio.current_time()
            for scope, deadline in list(self._deadlines.items()):
                if deadline <= now:
                    scope.cancel()

    async def _health_loop(self) -> None:
        policy = self.manager.policy
        failures = 0
        while not self._stopping:
            with anyio.move_on_after(policy.health_interval):
                await self._wake.wait()
            self._wake = anyio.Event()
            if self.stopping:
                return
            if self._reconnect:
                self._reconnect = False
                if self._session_auth is not self.auth:  # connected before the login finished
                    self._lost_reason = "reconnecting with new credentials"
                    return
            try:
                with anyio.fail_after(min(self.config.timeout_seconds, 10.0)):
                    await self._probe()
            except Exception as exc:
                if _contains(exc, _TRANSPORT_ERRORS) or (isinstance(exc, MCPError) and exc.code == -32000):
                    self._lost_reason = f"connection lost: {_describe(exc)}"
                    return
                failures += 1
                if failures >= 2:
                    self.state = "degraded"
                    self.reason = f"{failures} failed health checks: {_describe(exc)}"
                if failures >= policy.unhealthy_after:
                    self._lost_reason = f"unhealthy after {failures} failed health checks: {_describe(exc)}"
                    return
                continue
            if failures:
                failures = 0
                self.state = "connected"
                self.reason = None

    async def _probe(self) -> None:
        """One cheap request: ``ping`` on legacy connections; 2026-07-28 removed ping, so a first-page list."""
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        client, caps = self.client, self.capabilities
        assert client is not None
        if self.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            await client.session.send_ping()
        elif caps is not None and caps.tools is not None:
            await client.list_tools()
        elif caps is not None and caps.prompts is not None:
            await client.list_prompts()
        elif caps is not None and caps.resources is not None:
            await client.list_resources()

    # -- change notifications ------------------------------------------------------------------

    def _wants_listen(self) -> bool:
        caps = self.capabilities
        if caps is None or self.client is None:
            return False
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        if self.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            return False
        return any(getattr(getattr(caps, name), "list_changed", False) for name in ("tools", "resources", "prompts"))

    def mark_dirty(self, *kinds: str) -> None:
        """Schedule a re-list of ``kinds`` (``tools``, ``resources``, ``prompts``)."""
        self._dirty.update(kinds)
        self._dirty_event.set()

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self.mark_dirty("tools")
        elif isinstance(message, types.PromptListChangedNotification):
            self.mark_dirty("prompts")
        elif isinstance(message, types.ResourceListChangedNotification):
            self.mark_dirty("resources")
        elif isinstance(message, Exception):
            log.debug("MCP server %r sent something unusable: %s", self.id, _describe(message))
        await anyio.lowlevel.checkpoint()

    async def _listener(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        caps = self.capabilities
        assert caps is not None and self.client is not None
        started = False

        def ready() -> None:
            nonlocal started
            if not started:
                started = True
                task_status.started()

        def flag(name: str) -> bool:
            return bool(getattr(getattr(caps, name), "list_changed", False))

        failures = 0
        while not self._stopping and failures < 5:
            try:
                async with self.client.listen(
                    tools_list_changed=flag("tools"),
                    prompts_list_changed=flag("prompts"),
                    resources_list_changed=flag("resources"),
                ) as sub:
                    ready()
                    failures = 0
                    async for event in sub:
                        if isinstance(event, ToolsListChanged):
                            self.mark_dirty("tools")
                        elif isinstance(event, PromptsListChanged):
                            self.mark_dirty("prompts")
                        elif isinstance(event, ResourcesListChanged):
                            self.mark_dirty("resources")
                ready()
                return
            except ListenNotSupportedError:
                ready()
                return
            except (SubscriptionLost, MCPError, TimeoutError) as exc:
                # No replay on re-listen: refetch everything we depend on.
                ready()
                failures += 1
                log.info("MCP server %r: subscription lost (%s); listening again", self.id, _describe(exc))
                self.mark_dirty("tools", "resources", "prompts")
                await anyio.sleep(min(0.2 * 2**failures, 5.0))
            except Exception as exc:
                ready()
                if _contains(exc, _TRANSPORT_ERRORS):
                    self.wake()
                    return
                failures += 1
                log.warning("MCP server %r: listen failed: %s", self.id, _describe(exc))
                await anyio.sleep(min(0.2 * 2**failures, 5.0))
        ready()

    async def _refresher(self) -> None:
        while True:
            await self._dirty_event.wait()
            self._dirty_event = anyio.Event()
            kinds, self._dirty = self._dirty, set()
            try:
                with anyio.fail_after(self.config.timeout_seconds):
                    await self._relist(kinds)
            except Exception as exc:
                log.warning("MCP server %r: re-listing %s failed: %s", self.id, sorted(kinds), _describe(exc))
                self.wake()
                continue
            self.manager.lists_changed(self, kinds)

    async def _list_all(self, method: Callable[..., Any], attr: str) -> list[Any]:
        items: list[Any] = []
        cursor: str | None = None
        for _ in range(_MAX_PAGES):
            page = await method(cursor=cursor)
            items.extend(getattr(page, attr))
            cursor = page.next_cursor
            if not cursor or len(items) >= _MAX_ITEMS:
                break
        if len(items) > _MAX_ITEMS:
            self._warn(f"{attr}: only the first {_MAX_ITEMS} of more are used")
        return items[:_MAX_ITEMS]

    async def _relist(self, kinds: set[str]) -> None:
        """Re-list what the server advertises; never ask for a list it did not advertise."""
        client, caps = self.client, self.capabilities
        if client is None or caps is None:
            return
        if "tools" in kinds:
            if caps.tools is None:
                self.tools = []
            else:
                self.invalid_tools = []
                try:
                    self.tools = await self._list_all(client.list_tools, "tools")
                except ValidationError:
                    # One malformed tool must not hide the others: list raw, keep what validates.
                    self.tools = await self._list_tools_leniently(client)
        if "resources" in kinds:
            if caps.resources is not None:
                self.resources = await self._list_all(client.list_resources, "resources")
                self.templates = await self._list_all(client.list_resource_templates, "resource_templates")
            else:
                self.resources, self.templates = [], []
        if "prompts" in kinds:
            self.prompts = await self._list_all(client.list_prompts, "prompts") if caps.prompts is not None else []

    async def _list_tools_leniently(self, client: Client) -> list[types.Tool]:
        tools: list[types.Tool] = []
        self.invalid_tools = []
        cursor: str | None = None
        for _ in range(_MAX_PAGES):
            request = types.ListToolsRequest(params=types.PaginatedRequestParams(cursor=cursor))
            page = _RawToolPage.model_validate(await _send_unvalidated(client, request, self.config.timeout_seconds))
            for raw in page.tools[:_MAX_ITEMS]:
                try:
                    tools.append(types.Tool.model_validate(raw))
                except ValidationError as exc:
                    name = raw.get("name") if isinstance(raw.get("name"), str) else "(unnamed)"
                    reason = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:3])
                    self.invalid_tools.append(
                        {"tool": str(name)[:200], "reason": f"invalid definition: {reason}"[:300]}
                    )
            cursor = page.next_cursor
            if not cursor or len(tools) >= _MAX_ITEMS:
                break
        tools = tools[:_MAX_ITEMS]
        # Let the session learn the valid tools (output schemas, 2026 header maps) as a normal listing
        # would; otherwise its result validation re-lists and trips over the malformed ones again.
        absorb = getattr(client.session, "_absorb_tool_listing", None)
        if absorb is not None:
            absorb(types.ListToolsResult(tools=tools), complete=True)
        return tools

    def _warn(self, text: str) -> None:
        if text not in self.warnings:
            self.warnings.append(text)
            del self.warnings[:-50]

    # -- requests ------------------------------------------------------------------------------

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
        if _contains(exc, _TRANSPORT_ERRORS):
            self.wake()
            return TransportError(tool, f"MCP server {self.id!r}: {_describe(exc)}")
        return ExecutionFailed(tool, _describe(exc))

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


async def _send_unvalidated(client: Client, request: Any, timeout: float) -> Any:
    """Send ``request`` and return the raw result dict.

    ``ClientSession.send_request`` validates the whole result against the protocol schema, so one
    malformed tool would fail the listing of every tool. The session exposes no unvalidated path, so
    this uses its dispatcher the way ``send_request`` does (stamp, then send).
    """
    session: Any = client.session
    data = request.model_dump(by_alias=True, mode="json", exclude_none=True)
    opts: dict[str, Any] = {"timeout": timeout}
    session._stamp(data, opts)
    return await session._dispatcher.send_raw_request(data["method"], data.get("params"), opts)


def _approx_b64_bytes(data: str) -> int:
    return len(data) * 3 // 4


def render_content(content: Any) -> str:
    """MCP content blocks as text: images and binaries are described, never inlined (R17.7)."""
    parts: list[str] = []
    for block in content or ():
        if isinstance(block, types.TextContent):
            parts.append(block.text)
        elif isinstance(block, types.ImageContent):
            parts.append(f"[Image: {block.mime_type} (~{_approx_b64_bytes(block.data)} bytes)]")
        elif isinstance(block, types.AudioContent):
            parts.append(f"[Audio: {block.mime_type} (~{_approx_b64_bytes(block.data)} bytes)]")
        elif isinstance(block, types.EmbeddedResource):
            res = block.resource
            text = getattr(res, "text", None)
            parts.append(text if isinstance(text, str) else f"[Resource: {res.uri}]")
        elif isinstance(block, types.ResourceLink):
            parts.append(f"[Resource: {block.uri}]")
        else:
            parts.append(f"[{type(block).__name__}]")
    return "\n".join(parts)


def resource_item(contents: Any) -> dict[str, Any]:
    """One resource content as ``{content, content_type, mime_type}`` (binary base64, capped)."""
    mime = getattr(contents, "mime_type", None)
    text = getattr(contents, "text", None)
    if isinstance(text, str):
        return {"content": cap_text(text), "content_type": "text", "mime_type": mime or "text/plain"}
    blob = getattr(contents, "blob", "") or ""
    kind = "image" if (mime or "").startswith("image/") else "binary"
    if len(blob) > 4_000_000:
        return {
            "content": "",
            "content_type": kind,
            "mime_type": mime,
            "error": f"content too large to return (~{_approx_b64_bytes(blob)} bytes)",
        }
    try:
        base64.b64decode(blob, validate=True)
    except ValueError:
        return {"content": "", "content_type": kind, "mime_type": mime, "error": "the server sent invalid base64"}
    return {"content": blob, "content_type": kind, "mime_type": mime}
