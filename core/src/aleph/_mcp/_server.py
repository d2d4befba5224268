"""One configured MCP server: its connection, supervision (health, bounded restarts) and live lists.

A :class:`ServerConnection` owns one long-running supervisor task. Inside it, the SDK ``Client``
is entered and exited in the same task (anyio cancel scopes require that); other tasks only send
requests through it. Change notifications arrive on two paths (R17.5, ENV.md): the legacy
``message_handler`` and, on 2026-07-28 connections, a ``subscriptions/listen`` stream held open by a
background task. Both only mark lists dirty; one refresher task re-lists and hands the result to the
manager, so a burst of notifications costs one re-list.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from collections import deque
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

from aleph._config import McpServerConfig
from aleph._mcp._chain import CHAIN_ENV, child_chain
from aleph._mcp._eof import watched_stdio
from aleph._mcp._hygiene import expand_vars
from aleph._mcp._listing import Listing
from aleph._mcp._requests import TRANSPORT_ERRORS, Requests, contains, describe
from aleph._mcp._status import ServerStatus, State

if TYPE_CHECKING:
    from aleph._mcp._roles import ConnectionOwner

__all__ = ["ServerConnection", "expanded_settings"]

log = logging.getLogger("aleph.mcp")


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


class ServerConnection(Requests, Listing):
    """The supervised connection to one configured MCP server."""

    def __init__(self, server_id: str, config: McpServerConfig, manager: ConnectionOwner) -> None:
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
                reason = describe(exc)
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
                if contains(exc, TRANSPORT_ERRORS) or (isinstance(exc, MCPError) and exc.code == -32000):
                    self._lost_reason = f"connection lost: {describe(exc)}"
                    return
                failures += 1
                if failures >= 2:
                    self.state = "degraded"
                    self.reason = f"{failures} failed health checks: {describe(exc)}"
                if failures >= policy.unhealthy_after:
                    self._lost_reason = f"unhealthy after {failures} failed health checks: {describe(exc)}"
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
            log.debug("MCP server %r sent something unusable: %s", self.id, describe(message))
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
                log.info("MCP server %r: subscription lost (%s); listening again", self.id, describe(exc))
                self.mark_dirty("tools", "resources", "prompts")
                await anyio.sleep(min(0.2 * 2**failures, 5.0))
            except Exception as exc:
                ready()
                if contains(exc, TRANSPORT_ERRORS):
                    self.wake()
                    return
                failures += 1
                log.warning("MCP server %r: listen failed: %s", self.id, describe(exc))
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
                log.warning("MCP server %r: re-listing %s failed: %s", self.id, sorted(kinds), describe(exc))
                self.wake()
                continue
            self.manager.lists_changed(self, kinds)
