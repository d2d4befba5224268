"""What a plugin's ``aleph_register_tools`` receives: the ``register`` callable and its :class:`PluginContext`.

The context reaches the plugin manager and, at call time, the runtime, through the small protocols
below (:class:`PluginHost`, :class:`RuntimeHandle`): the hook specs and the loader both import this
module, and it imports neither of them nor the runtime.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from aleph._contract._registry import ToolRegistry
from aleph._contract._tool import Tool, ToolContractError, contract_problem
from aleph._contract._types import ToolSource
from aleph._ledger import ledger_directory
from aleph._plugins._trust import HeldPlugin, PluginTrust
from aleph._protected import HOST_EXECUTED_PATHS, check_pattern
from aleph._seal import StateSeal

if TYPE_CHECKING:
    from aleph._chokepoint._approval import ApprovalRequester
    from aleph._chokepoint._roles import Stores
    from aleph._chokepoint._scoped import ScopedToolService
    from aleph._chokepoint._tiers import ExecTier
    from aleph._config import AlephConfig
    from aleph._ledger import Ledger
    from aleph._ledger._events import EventLog
    from aleph._principal import Principal
    from aleph._turn import TurnContext

log = logging.getLogger("aleph.plugins")

__all__ = ["Cleanup", "LoadedPlugin", "PluginContext", "PluginHost", "RuntimeHandle", "Service", "ToolRegistrar"]

Cleanup = Callable[[], Awaitable[None]]
Service = Callable[[], Awaitable[None]]
"""A long-running background job: a coroutine function run while the runtime's services are started."""


class RuntimeHandle(Protocol):
    """The runtime as a plugin context reaches it at call time (:class:`aleph.Aleph` has this shape)."""

    @property
    def chokepoint(self) -> Stores:
        """The shared chokepoint's stores (ledger, event log, data directory)."""
        ...

    def tool_service(
        self,
        agent: str | None = None,
        channel: str | None = None,
        turn: TurnContext | None = None,
        requester: ApprovalRequester | None = None,
        tier: str | ExecTier | None = None,
        *,
        principal: Principal | None = None,
    ) -> ScopedToolService:
        """A permission-checked tool service of this runtime."""
        ...


class PluginHost(Protocol):
    """The plugin manager as a plugin context uses it (:class:`~aleph._plugins._loader.PluginManager`)."""

    runtime: RuntimeHandle | None
    services: list[tuple[str, Service]]
    trust: PluginTrust | None

    def call_each(self, hook: str, **kwargs: Any) -> list[tuple[str, Any]]:
        """Call ``hook`` on every plugin; (plugin, result) pairs."""
        ...

    def load_distribution(self, distribution: str, path: Path | None = None) -> LoadedPlugin | HeldPlugin:
        """Load a newly installed distribution into the running runtime."""
        ...


@dataclass(slots=True)
class LoadedPlugin:
    """A plugin that loaded: its entry-point name, distribution, the tools it registered and those it held.

    ``held_tools`` maps a tool that broke the tool contract to why (its siblings loaded); ``note`` says
    why a plugin adds no tools (no ``@aleph.hookimpl`` marker found, or a plugin of other hooks only).
    """

    name: str
    distribution: str | None = None
    version: str | None = None
    tools: list[str] = field(default_factory=list)
    held_tools: dict[str, str] = field(default_factory=dict)
    hooks: list[str] = field(default_factory=list)
    note: str | None = None

    def to_json(self) -> dict[str, Any]:
        """JSON form for ``aleph plugins --json``."""
        return {
            "name": self.name,
            "distribution": self.distribution,
            "version": self.version,
            "tools": list(self.tools),
            "held_tools": dict(self.held_tools),
            "hooks": list(self.hooks),
            "note": self.note,
        }


class ToolRegistrar:
    """The ``register`` callable a plugin receives: ``register(tool, ...)``; records ownership.

    Every registration is checked here, where core receives it: something that is not a tool fails the
    plugin (its error names the plugin and the hook); a tool that breaks the tool contract (no
    description, a bad name) is held, named with the reason in ``held``, and the plugin's other tools load.
    """

    def __init__(self, registry: ToolRegistry, source: ToolSource, plugin: str = "") -> None:
        self._registry = registry
        self._source = source
        self._plugin = plugin or source.plugin_id or "aleph"
        self.names: list[str] = []
        self.held: dict[str, str] = {}

    def __call__(self, *tools: Tool) -> None:
        """Register each tool under this plugin."""
        for tool in tools:
            if not isinstance(tool, Tool):
                raise TypeError(
                    f"plugin {self._plugin!r}: aleph_register_tools passed {_shown(tool)} to register(), "
                    "not a tool (an AlephTool, an @aleph.tool function or a LoopTool)"
                )
            problem = contract_problem(tool)
            if problem is not None:
                self._hold(tool, problem)
                continue
            try:
                entry = self._registry.register(tool, source=self._source)
            except ToolContractError as exc:
                self._hold(tool, str(exc))
                continue
            self.names.append(entry.name)

    def _hold(self, tool: Tool, problem: str) -> None:
        name = getattr(type(tool), "NAME", None) or getattr(tool, "name", None) or type(tool).__name__
        self.held[str(name)] = problem
        log.warning("plugin %r: tool %s is held: %s", self._plugin, name, problem)


def _shown(value: object) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 80 else text[:79] + '…'}"


@dataclass(slots=True)
class PluginContext:
    """What a plugin's ``aleph_register_tools`` gets besides ``register``."""

    config: AlephConfig
    plugin_name: str
    _cleanups: list[Cleanup]
    _manager: PluginHost | None = None

    def _runtime(self) -> RuntimeHandle:
        runtime = self._manager.runtime if self._manager is not None else None
        if runtime is None:
            raise RuntimeError(
                "the runtime is not built yet: use the context's tool_service, ledger and events at call time, "
                "not inside aleph_register_tools"
            )
        return runtime

    def tool_service(
        self,
        agent: str | None = None,
        channel: str | None = None,
        turn: TurnContext | None = None,
        requester: ApprovalRequester | None = None,
        tier: str | ExecTier | None = None,
        *,
        principal: Principal | None = None,
    ) -> ScopedToolService:
        """A permission-checked tool service of this runtime (e.g. to run a team member's calls as that agent).

        The same as :meth:`aleph.Aleph.tool_service`; usable at call time only. Work done for another
        principal goes through :meth:`aleph.CallContext.delegate` (or this service's ``delegate``), never
        through a service built for the other agent directly.
        """
        return self._runtime().tool_service(
            agent=agent, channel=channel, turn=turn, requester=requester, tier=tier, principal=principal
        )

    @property
    def ledger(self) -> Ledger | None:
        """The runtime's signed ledger (None when ``[ledger] enabled = false``); usable at call time only."""
        return self._runtime().chokepoint.ledger

    @property
    def events(self) -> EventLog | None:
        """The runtime's session event log; usable at call time only."""
        return self._runtime().chokepoint.events

    def add_service(self, name: str, factory: Service) -> None:
        """Run ``await factory()`` in the background while the runtime's services are started.

        ``aleph serve`` and commands that want background work call :meth:`aleph.Aleph.start_services`;
        a plain :func:`aleph.load` never starts them. A service that raises is logged and restarted
        with back-off; all are cancelled when the runtime closes.
        """
        if self._manager is None:
            raise RuntimeError("this plugin context has no plugin manager")
        self._manager.services.append((f"{self.plugin_name}:{name}", factory))

    @property
    def protected_paths(self) -> list[Path]:
        """Aleph's own files no tool may write: config files, the data directory (ledger, keys, sessions)."""
        paths = [Path(f).resolve() for f in self.config.files]
        paths.append(self.config.workspace_root / "aleph.toml")
        paths.append(self.config.data_dir)
        paths.append(ledger_directory(self.config))
        return sorted(set(paths))

    @property
    def protected_patterns(self) -> list[str]:
        """Globs no tool may write: ProtectedPaths.HOST_EXECUTED, [workspace] protected, aleph_protected_paths.

        A plugin whose ``aleph_protected_paths`` registers a bad glob fails like any failing hook.
        """
        extra: list[str] = []
        if self._manager is not None:
            self._manager.call_each("aleph_protected_paths", register=lambda p: extra.append(check_pattern(p)))
        return [*HOST_EXECUTED_PATHS, *self.config.workspace.protected, *extra]

    def call_hook(self, hook: str, **kwargs: Any) -> list[tuple[str, Any]]:
        """Call the hook ``hook`` on every plugin (e.g. to collect providers); returns (plugin, result) pairs."""
        if self._manager is None:
            return []
        return self._manager.call_each(hook, **kwargs)

    @property
    def workspace(self) -> Path:
        """The workspace root tools work in."""
        return self.config.workspace_root

    @property
    def data_dir(self) -> Path:
        """Aleph's data directory; a plugin keeps its state under ``data_dir / <plugin name>``."""
        return self.config.data_dir

    def add_cleanup(self, fn: Cleanup) -> None:
        """Run ``await fn()`` when the runtime closes (last registered, first run)."""
        self._cleanups.append(fn)

    def state_seal(self, purpose: str) -> StateSeal:
        """A seal for state this plugin keeps that decides what runs (approved digests, grants).

        HMAC under the runtime's keystore secret, out of reach of sandboxed tools: seal what a human
        approved, and treat a record whose seal does not verify as never approved.
        """
        return StateSeal(self.config.key_dir, f"plugin-{self.plugin_name}-{purpose}")

    @property
    def plugin_trust(self) -> PluginTrust:
        """The trust records of installed plugins (``<data_dir>/plugins/trust.json``)."""
        if self._manager is None or self._manager.trust is None:
            raise RuntimeError("this plugin context has no plugin manager with trust records")
        return self._manager.trust

    def load_distribution(self, distribution: str, path: Path | None = None) -> LoadedPlugin | HeldPlugin:
        """Load the newly installed ``distribution`` into the running runtime (usable at call time only).

        ``path`` is the plugin folder it was installed in (None: the environment); its trust record is
        consulted first.
        """
        if self._manager is None:
            raise RuntimeError("this plugin context has no plugin manager")
        return self._manager.load_distribution(distribution, path)
