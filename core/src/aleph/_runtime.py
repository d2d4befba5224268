"""The runtime: configuration, plugins, registry and per-request tool services in one object."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any

from aleph._chokepoint._alongside import SharedInbox
from aleph._chokepoint._approval import ApprovalRequester
from aleph._chokepoint._delegation import Delegator
from aleph._chokepoint._layers import AccessControl, build_chokepoint
from aleph._chokepoint._owners import SessionOwners
from aleph._chokepoint._scoped import DefinitionRewriter, ScopedToolService
from aleph._chokepoint._tiers import ExecTier
from aleph._chokepoint._who import bound_role, principal_for
from aleph._config import AlephConfig, load_config
from aleph._contract._registry import RegisteredTool, ToolRegistry
from aleph._contract._tool import Tool
from aleph._contract._types import ToolSource
from aleph._discovery import Discovery
from aleph._errors import PermissionDenied
from aleph._human import HumanChannel
from aleph._mcp import McpManager
from aleph._mcp._chain import config_identity
from aleph._plugins._context import Cleanup
from aleph._plugins._loader import PluginManager
from aleph._plugins._trust import PluginTrust
from aleph._principal import Principal
from aleph._seal import StateSeal
from aleph._turn import TurnContext

__all__ = ["Aleph", "load", "runtime_for"]

log = logging.getLogger("aleph")


def _plugin_name(plugin: object) -> str:
    name = getattr(plugin, "ALEPH_PLUGIN_NAME", None) or getattr(plugin, "__name__", None)
    return str(name or type(plugin).__name__)


class Aleph:
    """A loaded Aleph: use as ``async with aleph.load() as rt:`` and ask it for tool services.

    The CLI and ``aleph serve`` are thin layers over this object.
    """

    def __init__(
        self,
        config: AlephConfig,
        plugins: PluginManager,
        registry: ToolRegistry,
        cleanups: list[Cleanup],
        mcp: McpManager | None = None,
    ) -> None:
        self.config = config
        self.plugins = plugins
        self.registry = registry
        self.mcp = mcp if mcp is not None else McpManager(config.mcp, registry, config.data_dir)
        """The MCP client manager; servers connect when the runtime is entered."""
        self.access = AccessControl(config)
        """Validated permission layers and tier settings."""
        self.chokepoint = build_chokepoint(config, registry, plugins)
        """State shared by every scoped service: approval grants, ledger, event log, caches."""
        self.chokepoint.owners = SessionOwners(config.data_dir / "session_owners.sqlite3")
        self.chokepoint.delegator = Delegator(self.access)
        for scheme, resolver in plugins.secret_resolvers:
            self.chokepoint.secrets.add(scheme, resolver)
        self.inbox = SharedInbox(config, lambda: self.config)
        """The data directory's approval inbox ``aleph console`` reads (``[console] inbox``)."""
        self.discovery = Discovery(config.tools, registry, config.data_dir)
        """``[tools]`` discovery: search index, disclosure rewriters, deferred sets, session knobs."""
        self._cleanups = cleanups
        self._load_args: tuple[str | os.PathLike[str] | None, str | os.PathLike[str] | None] = (None, None)
        self._closed = False
        self._services: list[asyncio.Task[None]] = []
        plugins.runtime = self

    async def __aenter__(self) -> Aleph:
        ledger = self.chokepoint.ledger
        if ledger is not None:  # recovery at start: seal the rows a crashed writer left unsigned, cut the rest
            await asyncio.to_thread(ledger.recover)
        await self.mcp.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def start_services(self) -> list[str]:
        """Start the background services plugins added (schedulers, watchers); returns their names.

        ``aleph serve`` calls this; a plain :func:`load` never runs them. Each service that raises is
        logged and restarted with back-off (1 s doubling to 60 s); :meth:`aclose` cancels them all.
        Calling it again starts nothing new.
        """
        if self._services or self._closed:
            return [task.get_name() for task in self._services]
        for name, factory in self.plugins.services:
            self._services.append(asyncio.create_task(_supervise(name, factory), name=name))
        return [task.get_name() for task in self._services]

    async def aclose(self) -> None:
        """Release every resource plugins registered (browsers, connections); safe to call twice."""
        if self._closed:
            return
        self._closed = True
        for task in self._services:
            task.cancel()
        if self._services:
            await asyncio.gather(*self._services, return_exceptions=True)
        try:
            await self.mcp.aclose()
        except Exception:
            log.exception("closing the MCP manager failed")
        while self._cleanups:
            cleanup = self._cleanups.pop()
            try:
                await cleanup()
            except Exception:
                log.exception("a plugin cleanup failed")
        if self.chokepoint.ledger is not None:
            await self.chokepoint.ledger.aclose()
        if self.chokepoint.events is not None:
            self.chokepoint.events.close()
        self.chokepoint.owners.close()
        self.inbox.close()

    def reload_config(self) -> AlephConfig:
        """Read the configuration files again and put their permission layers in force; returns the new config.

        Services built after this judge by the new layers, agents and tiers (a running service keeps the
        policy it was built with). A bad file raises :class:`~aleph.ConfigError` and changes nothing.
        Plugins keep the copy of the configuration they registered their tools with.
        """
        path, workspace = self._load_args
        config = load_config(path, workspace=workspace)
        access = AccessControl(config)  # validates every layer before anything is replaced
        self.config, self.access = config, access
        self.chokepoint.delegator = Delegator(access)
        self.chokepoint._static.clear()
        self.chokepoint._lists.clear()
        return config

    def register(self, tool: Tool, *, source: ToolSource | None = None) -> RegisteredTool:
        """Add one tool owned by the program itself."""
        return self.registry.register(tool, source=source or ToolSource.plugin("__main__"))

    def tool_service(
        self,
        agent: str | None = None,
        channel: str | None = None,
        turn: TurnContext | None = None,
        requester: ApprovalRequester | None = None,
        tier: str | ExecTier | None = None,
        *,
        channel_permissions: Mapping[str, Any] | None = None,
        rewriters: Sequence[DefinitionRewriter] = (),
        deferred: Any = None,
        discovery: bool = True,
        principal: Principal | None = None,
        human: HumanChannel | None = None,
    ) -> ScopedToolService:
        """The permission-checked tool service for one request, bound to one principal.

        :param agent: the agent acting (its ``[agents.<name>]`` layer and allow-set apply).
        :param channel: where the request came from (its ``[channels.<name>]`` layer and role apply).
        :param turn: session, caller role, unattended / plan flags; tools read it with ``aleph.current_turn()``.
        :param requester: who to ask when a call needs approval (default: a plugin's, else nobody).
        :param tier: ``plan`` / ``ask`` / ``auto`` / ``full`` for this request (default: agent, then global).
        :param channel_permissions: a request-time permission layer (same shape as ``tool_permissions``);
            a malformed one denies everything.
        :param rewriters: definition rewriters (default: ``[tools]`` progressive disclosure for the session's mode).
        :param deferred: a deferred set (default: the session's, from ``[tools]`` deferral settings).
        :param discovery: False leaves out everything ``[tools]`` adds (rewriters, deferral, discovery tools).
        :param principal: who is calling (default: derived from ``agent``, ``channel`` and the turn's
            ``session_key``, ``caller_role`` and ``principal``). Given, it names the agent and channel and
            ``agent``/``channel`` must be left out or agree. Its session key is bound to its agent the first
            time it is used; another agent's session is refused with :class:`~aleph.PermissionDenied`.
        :param human: the channel to the person the request came from, for tools that ask them
            (:meth:`aleph.CallContext.ask_human`); default none: asking is a clear error.
        """
        if principal is not None:
            if (agent is not None and agent != principal.agent) or (
                channel is not None and channel != principal.channel
            ):
                raise ValueError("tool_service: agent and channel must agree with the principal given")
            agent, channel = principal.agent, principal.channel
            principal, turn = bound_role(principal, turn)  # one role for every gate: the weakest given
        else:
            principal = principal_for(agent, channel, turn, self.access.role(channel, turn))
        if (
            principal.session
            and not self.chokepoint.owners.claim(principal.session, principal.owner) == principal.owner
        ):
            raise PermissionDenied("session", f"session {principal.session!r} belongs to another agent")
        setup = self.discovery.prepare(turn, rewriters=rewriters, deferred=deferred) if discovery else None
        if setup is not None:
            rewriters, deferred = setup.rewriters, setup.deferred
            if tier is None:
                tier = setup.knobs.exec_tier
        agents = self.access.bounds(principal.agents)
        if principal.chain or len(agents) > len(
            principal.agents
        ):  # acting for others, or bounded: every agent's policy, never one alone
            policy = self.access.chain_policy(agents, channel, channel_permissions)
            allowed = self.access.chain_allowed(agents)
            resolved = min(self.access.tier(a, channel, tier, turn) for a in agents)
        else:
            policy = self.access.policy(agent, channel, channel_permissions)
            allowed = self.access.allowed(agent)
            resolved = self.access.tier(agent, channel, tier, turn)
        service = ScopedToolService(
            self.chokepoint,
            policy=policy,
            tier=resolved,
            agent=agent,
            channel=channel,
            turn=turn,
            # Asked beside the data directory's inbox when [console] inbox says so (aleph console answers there).
            requester=self.inbox.alongside(
                requester if requester is not None else self.chokepoint.default_requester, principal
            ),
            allowed=allowed,
            rewriters=rewriters,
            deferred=deferred,
            extra_tools=setup.extra_tools if setup is not None else None,
            principal=principal,
            human=human,
        )
        return setup.bind(service) if setup is not None else service


async def _supervise(name: str, factory: Callable[[], Awaitable[None]]) -> None:
    delay = 1.0
    while True:
        started = time.monotonic()
        try:
            await factory()
            log.warning("service %s returned; restarting it in %.0f s", name, delay)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("service %s failed; restarting it in %.0f s", name, delay)
        if time.monotonic() - started > 60:
            delay = 1.0  # it ran a good while: a fresh failure, not a crash loop
        await asyncio.sleep(delay)
        delay = min(delay * 2, 60.0)


def load(
    config_path: str | os.PathLike[str] | None = None,
    *,
    workspace: str | os.PathLike[str] | None = None,
    plugins: Iterable[object] = (),
    entry_points: bool = True,
    strict: bool | None = None,
) -> Aleph:
    """Load configuration and plugins and register every tool.

    :param config_path: a project ``aleph.toml``; default ``$ALEPH_CONFIG`` or ``<workspace>/aleph.toml``.
    :param workspace: the directory tools work in (default: the config file's directory or the cwd).
    :param plugins: in-process plugin objects (modules or instances with ``@aleph.hookimpl`` methods).
    :param entry_points: load installed plugins from the ``aleph`` entry-point group.
    :param strict: re-raise plugin failures (default ``$ALEPH_STRICT_PLUGINS=1`` or ``[plugins] strict``).
    """
    config = load_config(config_path, workspace=workspace)
    runtime = runtime_for(config, plugins=plugins, entry_points=entry_points, strict=strict)
    runtime._load_args = (config_path, workspace)  # what reload_config reads again
    return runtime


def runtime_for(
    config: AlephConfig, *, plugins: Iterable[object] = (), entry_points: bool = True, strict: bool | None = None
) -> Aleph:
    """:func:`load` for a configuration already read (``aleph config check`` reads it leniently first)."""
    if strict is None:
        strict = os.environ.get("ALEPH_STRICT_PLUGINS", "") not in ("", "0") or config.plugins.strict
    disabled = set(config.plugins.disable)
    disabled.update(n.strip() for n in os.environ.get("ALEPH_DISABLE_PLUGINS", "").split(",") if n.strip())
    trust = PluginTrust(config.data_dir / "plugins" / "trust.json", StateSeal(config.key_dir, "plugin-trust"))
    manager = PluginManager(strict=strict, disabled=disabled, trust=trust, require_trust=config.plugins.require_trust)
    for plugin in plugins:
        manager.add(plugin, _plugin_name(plugin))
    if entry_points:
        manager.load_entry_points(folders=config.plugin_folders)
    manager.check_pending()
    # Plugins get their own copy: nothing a plugin does to it reaches the policy, tiers or servers in force.
    plugin_config = config.model_copy(deep=True)
    manager.configure(plugin_config)
    registry = ToolRegistry()
    cleanups: list[Cleanup] = []
    manager.register_tools(registry, plugin_config, cleanups)
    mcp = McpManager(config.mcp, registry, config.data_dir, chain_id=config_identity(config))
    return Aleph(config, manager, registry, cleanups, mcp)
