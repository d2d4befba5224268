"""Plugin loading: entry points one by one, failures isolated and reported.

A plugin that fails to import, to validate against the hook specs, or to register its
tools is recorded with its distribution and error, and the rest keep working. Strict mode
(``ALEPH_STRICT_PLUGINS=1`` or ``[plugins] strict``) re-raises instead, for CI.
"""

from __future__ import annotations

import importlib.metadata
import logging
import traceback
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import pluggy

from aleph import _hookspec
from aleph._errors import PluginError
from aleph._ledger import ledger_directory
from aleph._registry import ToolRegistry
from aleph._tool import Tool
from aleph._types import ToolSource

if TYPE_CHECKING:
    from aleph._approval import ApprovalRequester
    from aleph._config import AlephConfig
    from aleph._events import EventLog
    from aleph._ledger import Ledger
    from aleph._runtime import Aleph
    from aleph._scoped import ScopedToolService
    from aleph._tiers import ExecTier
    from aleph._turn import TurnContext

__all__ = ["FailedPlugin", "LoadedPlugin", "PluginContext", "PluginManager", "ToolRegistrar"]

log = logging.getLogger("aleph.plugins")

Cleanup = Callable[[], Awaitable[None]]
Service = Callable[[], Awaitable[None]]
"""A long-running background job: a coroutine function run while the runtime's services are started."""


@dataclass(slots=True)
class LoadedPlugin:
    """A plugin that loaded: its entry-point name, distribution and the tools it registered."""

    name: str
    distribution: str | None = None
    version: str | None = None
    tools: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """JSON form for ``aleph plugins --json``."""
        return {
            "name": self.name,
            "distribution": self.distribution,
            "version": self.version,
            "tools": list(self.tools),
        }


@dataclass(slots=True)
class FailedPlugin:
    """A plugin that did not load, and why."""

    name: str
    stage: Literal["import", "validate", "configure", "register"]
    error: str
    distribution: str | None = None
    version: str | None = None
    traceback: str = ""

    def to_json(self) -> dict[str, Any]:
        """JSON form for ``aleph plugins --json``."""
        return {
            "name": self.name,
            "stage": self.stage,
            "error": self.error,
            "distribution": self.distribution,
            "version": self.version,
        }


class ToolRegistrar:
    """The ``register`` callable a plugin receives: ``register(tool, ...)``; records ownership."""

    def __init__(self, registry: ToolRegistry, source: ToolSource) -> None:
        self._registry = registry
        self._source = source
        self.names: list[str] = []

    def __call__(self, *tools: Tool) -> None:
        """Register each tool under this plugin."""
        for tool in tools:
            entry = self._registry.register(tool, source=self._source)
            self.names.append(entry.name)


@dataclass(slots=True)
class PluginContext:
    """What a plugin's ``aleph_register_tools`` gets besides ``register``."""

    config: AlephConfig
    plugin_name: str
    _cleanups: list[Cleanup]
    _manager: PluginManager | None = None

    def _runtime(self) -> Aleph:
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
    ) -> ScopedToolService:
        """A permission-checked tool service of this runtime (e.g. to run a team member's calls as that agent).

        The same as :meth:`aleph.Aleph.tool_service`; usable at call time only.
        """
        return self._runtime().tool_service(agent=agent, channel=channel, turn=turn, requester=requester, tier=tier)

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


def _kwargs(impl: Any, **kwargs: Any) -> dict[str, Any]:
    """Only the hook arguments this implementation asks for (pluggy's own calling convention)."""
    return {k: v for k, v in kwargs.items() if k in impl.argnames}


def _dist_of(ep: importlib.metadata.EntryPoint) -> tuple[str | None, str | None]:
    dist = ep.dist
    if dist is None:
        return None, None
    return dist.metadata["Name"], dist.version


class PluginManager:
    """A typed facade over pluggy: load, isolate, report. Nothing else calls ``pm.hook``."""

    def __init__(self, *, strict: bool = False, disabled: Iterable[str] = ()) -> None:
        self._pm = pluggy.PluginManager(_hookspec.NAME)
        self._pm.add_hookspecs(_hookspec)
        self.strict = strict
        self.disabled = set(disabled)
        self.loaded: dict[str, LoadedPlugin] = {}
        self.failed: list[FailedPlugin] = []
        self.blocked: list[str] = []
        self.runtime: Aleph | None = None
        """The runtime these plugins serve, once it is built (plugin contexts reach it at call time)."""
        self.services: list[tuple[str, Service]] = []
        for name in self.disabled:
            self._pm.set_blocked(name)

    def _fail(
        self,
        name: str,
        stage: Literal["import", "validate", "configure", "register"],
        exc: BaseException,
        dist: str | None = None,
        version: str | None = None,
    ) -> None:
        if self.strict:
            raise PluginError(f"plugin {name!r} failed to {stage}: {type(exc).__name__}: {exc}") from exc
        log.warning("plugin %r failed to %s: %s", name, stage, exc)
        loaded = self.loaded.pop(name, None)
        self.failed.append(
            FailedPlugin(
                name,
                stage,
                f"{type(exc).__name__}: {exc}",
                dist or (loaded.distribution if loaded else None),
                version or (loaded.version if loaded else None),
                "".join(traceback.format_exception(exc)),
            )
        )
        plugin = self._pm.get_plugin(name)
        if plugin is not None:
            self._pm.unregister(plugin, name=name)

    def add(self, plugin: object, name: str, *, distribution: str | None = None, version: str | None = None) -> bool:
        """Register an in-process plugin object (a module or an instance with hookimpls).

        A plugin that brings its own extension points lists their hookspec modules (or classes) in
        ``ALEPH_HOOKSPECS``; they are added before its hooks are checked. Hooks no spec knows are
        checked by :meth:`check_pending`, once every plugin is in, so a plugin may implement a hook
        of a family that loads after it.
        """
        if name in self.disabled:
            self.blocked.append(name)
            return False
        try:
            for spec in getattr(plugin, "ALEPH_HOOKSPECS", ()) or ():
                self._pm.add_hookspecs(spec)
            self._pm.register(plugin, name=name)
        except Exception as exc:
            self._fail(name, "validate", exc, distribution, version)
            return False
        self.loaded[name] = LoadedPlugin(name, distribution, version)
        return True

    def check_pending(self) -> None:
        """Fail every plugin that implements a hook no loaded plugin or core specifies."""
        for name in list(self.loaded):
            plugin = self._pm.get_plugin(name)
            if plugin is None:
                continue
            unknown = sorted({impl.name for impl in self._pm.get_hookcallers(plugin) or [] if impl.spec is None})
            if unknown:
                exc = pluggy.PluginValidationError(plugin, f"unknown hooks: {', '.join(unknown)}")
                self._fail(name, "validate", exc)

    def load_entry_points(self, group: str = "aleph") -> None:
        """Import every entry point of ``group`` one by one; failures are recorded, not fatal."""
        for ep in sorted(importlib.metadata.entry_points(group=group), key=lambda e: e.name):
            dist, version = _dist_of(ep)
            if ep.name in self.disabled:
                self.blocked.append(ep.name)
                continue
            if ep.name in self.loaded:
                continue
            try:
                plugin = ep.load()
            except Exception as exc:
                self._fail(ep.name, "import", exc, dist, version)
                continue
            self.add(plugin, ep.name, distribution=dist, version=version)

    def _impls(self, hook: str) -> list[Any]:
        # get_hookimpls() lists implementations in registration order (pluggy *calls* them LIFO);
        # we call them one by one in registration order so failures stay isolated and predictable.
        caller = getattr(self._pm.hook, hook, None)
        return list(caller.get_hookimpls()) if caller is not None else []

    def configure(self, config: AlephConfig) -> None:
        """Run ``aleph_configure`` for each plugin, isolating failures."""
        for impl in self._impls("aleph_configure"):
            try:
                impl.function(**_kwargs(impl, config=config))
            except Exception as exc:
                self._fail(impl.plugin_name, "configure", exc)

    def register_tools(self, registry: ToolRegistry, config: AlephConfig, cleanups: list[Cleanup]) -> None:
        """Run ``aleph_register_tools`` for each plugin; a failing plugin's tools are rolled back."""
        for impl in self._impls("aleph_register_tools"):
            name = impl.plugin_name
            source = ToolSource.builtin() if name == "aleph" else ToolSource.plugin(name)
            registrar = ToolRegistrar(registry, source)
            mark = len(cleanups)
            try:
                context = PluginContext(config, name, cleanups, self)
                impl.function(**_kwargs(impl, register=registrar, context=context))
            except Exception as exc:
                for tool_name in registrar.names:
                    registry.unregister(tool_name)
                del cleanups[mark:]
                self._fail(name, "register", exc)
                continue
            if name in self.loaded:
                self.loaded[name].tools.extend(registrar.names)

    def call_each(self, hook: str, **kwargs: Any) -> list[tuple[str, Any]]:
        """Call ``hook`` on every plugin that implements it; returns (plugin, result) for non-None results.

        A plugin whose hook raises is logged and skipped for this call (a decision hook must not
        take the host down); in strict mode the error propagates.
        """
        results = []
        for impl in self._impls(hook):
            try:
                value = impl.function(**_kwargs(impl, **kwargs))
            except Exception:
                if self.strict:
                    raise
                log.exception("plugin %r hook %s failed", impl.plugin_name, hook)
                continue
            if value is not None:
                results.append((impl.plugin_name, value))
        return results

    def record_failure(
        self, name: str, stage: Literal["import", "validate", "configure", "register"], exc: BaseException
    ) -> None:
        """Record that plugin ``name`` failed at ``stage`` (re-raised as PluginError in strict mode)."""
        self._fail(name, stage, exc)

    def hook_functions(self, hook: str) -> list[tuple[str, Callable[..., Any]]]:
        """(plugin name, function) for every implementation of ``hook``, in registration order."""

        def bind(impl: Any) -> Callable[..., Any]:
            return lambda **kwargs: impl.function(**_kwargs(impl, **kwargs))

        return [(impl.plugin_name, bind(impl)) for impl in self._impls(hook)]

    def first_result(self, hook: str, **kwargs: Any) -> Any:
        """The first non-None result of ``hook`` (failures isolated like :meth:`call_each`)."""
        results = self.call_each(hook, **kwargs)
        return results[0][1] if results else None

    def report(self) -> dict[str, Any]:
        """Loaded, failed and blocked plugins, for ``aleph plugins``."""
        return {
            "loaded": [p.to_json() for p in sorted(self.loaded.values(), key=lambda p: p.name)],
            "failed": [f.to_json() for f in self.failed],
            "blocked": sorted(self.blocked),
        }
