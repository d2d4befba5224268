"""Plugin loading: entry points one by one, failures isolated and reported.

A plugin that fails to import, to validate against the hook specs, or to register its
tools is recorded with its distribution and error, and the rest keep working. Strict mode
(``ALEPH_STRICT_PLUGINS=1`` or ``[plugins] strict``) re-raises instead, for CI.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import logging
import sys
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import pluggy

from aleph._contract._registry import ToolRegistry
from aleph._contract._types import ToolSource
from aleph._errors import PluginError
from aleph._plugins import _hookspec
from aleph._plugins._context import Cleanup, LoadedPlugin, PluginContext, RuntimeHandle, Service, ToolRegistrar
from aleph._plugins._retry import call_retrying
from aleph._plugins._trust import HeldPlugin, PluginTrust, adds_digest, canonical_distribution, plugin_adds

if TYPE_CHECKING:
    from aleph._config import AlephConfig

__all__ = [
    "FailedPlugin",
    "HeldPlugin",
    "LoadedPlugin",
    "PluginContext",
    "PluginManager",
    "ToolRegistrar",
    "inspect_distribution",
]

log = logging.getLogger("aleph.plugins")


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


def _why_no_tools(plugin: object, hooks: list[str]) -> str | None:
    """Why a plugin will add no tools, named for its author; None when it implements tool registration."""
    if "aleph_register_tools" in hooks:
        return None
    if hooks:
        return f"adds no tools: a plugin of other hooks only ({', '.join(hooks)}), e.g. a policy-only plugin"
    unmarked = sorted(
        name
        for name in dir(plugin)
        if name.startswith("aleph_") and callable(getattr(plugin, name, None)) and not _marked(plugin, name)
    )
    if unmarked:
        return (
            f"registers nothing: no @aleph.hookimpl marker found on {', '.join(unmarked)} "
            "(decorate each hook function with @aleph.hookimpl)"
        )
    return "registers nothing: no @aleph.hookimpl marker found (it implements no aleph hook)"


def _marked(plugin: object, name: str) -> bool:
    return getattr(getattr(plugin, name, None), f"{_hookspec.NAME}_impl", None) is not None


def _roll_back(registry: ToolRegistry, registrar: ToolRegistrar, cleanups: list[Cleanup], mark: int) -> None:
    """Undo what a registration that is about to be retried did: its tools and cleanups."""
    for tool_name in registrar.names:
        registry.unregister(tool_name)
    registrar.names.clear()
    del cleanups[mark:]


def _kwargs(impl: Any, **kwargs: Any) -> dict[str, Any]:
    """Only the hook arguments this implementation asks for (pluggy's own calling convention)."""
    return {k: v for k, v in kwargs.items() if k in impl.argnames}


def _dist_of(ep: importlib.metadata.EntryPoint) -> tuple[str | None, str | None]:
    dist = ep.dist
    if dist is None:
        return None, None
    return dist.metadata["Name"], dist.version


def _folder_entry_points(folder: Path, group: str) -> list[importlib.metadata.EntryPoint]:
    """Entry points of ``group`` in the distributions installed in ``folder``.

    The folder joins ``sys.path`` at the end, so it never shadows the environment's own packages (aleph included).
    """
    where = str(folder)
    if where not in sys.path:
        sys.path.append(where)
    eps: list[importlib.metadata.EntryPoint] = []
    for dist in importlib.metadata.distributions(path=[where]):
        eps.extend(ep for ep in dist.entry_points if ep.group == group)
    return eps


class PluginManager:
    """A typed facade over pluggy: load, isolate, report. Nothing else calls ``pm.hook``."""

    def __init__(
        self,
        *,
        strict: bool = False,
        disabled: Iterable[str] = (),
        trust: PluginTrust | None = None,
        require_trust: bool = False,
    ) -> None:
        self._pm = pluggy.PluginManager(_hookspec.NAME)
        self._pm.add_hookspecs(_hookspec)
        self.strict = strict
        self.disabled = set(disabled)
        self.loaded: dict[str, LoadedPlugin] = {}
        self.failed: list[FailedPlugin] = []
        self.blocked: list[str] = []
        self.held: list[HeldPlugin] = []
        """Installed plugins held back by their trust record (not imported, or their tools withdrawn)."""
        self.trust = trust
        self.require_trust = require_trust
        self._entry_points: dict[str, list[str]] = {}
        self._parts: tuple[ToolRegistry, AlephConfig, list[Cleanup]] | None = None
        self._registered: set[str] = set()
        self.runtime: RuntimeHandle | None = None
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
        hooks = sorted({impl.name for impl in self._pm.get_hookcallers(plugin) or []})
        self.loaded[name] = LoadedPlugin(name, distribution, version, hooks=hooks, note=_why_no_tools(plugin, hooks))
        return True

    def load_entry_points(self, group: str = "aleph", folders: Iterable[Path] = ()) -> None:
        """Import every entry point of ``group`` one by one; failures are recorded, not fatal.

        ``folders`` are plugin folders (``pip install --target`` layouts) searched after the environment.
        A distribution whose trust record holds it back is not imported at all.
        """
        eps = list(importlib.metadata.entry_points(group=group))
        for folder in folders:
            if folder.is_dir():
                eps.extend(_folder_entry_points(folder, group))
        for ep in sorted(eps, key=lambda e: e.name):
            self._load_entry_point(ep)

    def _load_entry_point(self, ep: importlib.metadata.EntryPoint) -> LoadedPlugin | HeldPlugin | None:
        dist, version = _dist_of(ep)
        if ep.name in self.disabled:
            self.blocked.append(ep.name)
            return None
        if ep.name in self.loaded:
            return self.loaded[ep.name]
        self.held = [h for h in self.held if h.name != ep.name]  # judged afresh below
        if self.trust is not None:
            reason = self.trust.hold_reason(dist, version, require_trust=self.require_trust)
            if reason is not None:
                held = HeldPlugin(ep.name, dist, version, reason)
                self.held.append(held)
                log.warning("plugin %r (%s %s) is held back: %s", ep.name, dist, version, reason)
                return held
        try:
            plugin = ep.load()
        except Exception as exc:
            self._fail(ep.name, "import", exc, dist, version)
            return None
        if not self.add(plugin, ep.name, distribution=dist, version=version):
            return None
        return self.loaded[ep.name]

    def load_distribution(self, distribution: str, path: Path | None = None) -> LoadedPlugin | HeldPlugin:
        """Import, configure and register the plugins of a newly installed ``distribution`` at run time.

        ``path`` is the plugin folder it was installed into (None: the runtime's environment). The
        trust record is consulted as at start-up. Hooks other than tool registration that the chokepoint
        collected when the runtime was built (policy votes, command rules, the approval requester) take
        effect at the next load. Raises :class:`PluginError` when it has no ``aleph`` entry point.
        """
        if self._parts is None:
            raise RuntimeError("load_distribution needs a built runtime (tools registered)")
        registry, config, cleanups = self._parts
        importlib.invalidate_caches()
        wanted = canonical_distribution(distribution)
        if path is not None:
            candidates = _folder_entry_points(path, "aleph")
        else:
            candidates = list(importlib.metadata.entry_points(group="aleph"))
        eps = [ep for ep in candidates if canonical_distribution(_dist_of(ep)[0] or "") == wanted]
        if not eps:
            where = f" in {path}" if path else ""
            raise PluginError(f"distribution {distribution!r} has no 'aleph' entry point{where}")
        for ep in eps:
            if ep.name in self.loaded:  # an upgrade: the old version's tools and modules go first
                self._unload(ep.name, ep.module.split(".")[0], registry)
        result: LoadedPlugin | HeldPlugin | None = None
        names = []
        for ep in sorted(eps, key=lambda e: e.name):
            result = self._load_entry_point(ep)
            if isinstance(result, HeldPlugin):
                return result
            if result is not None:
                names.append(ep.name)
        if names:
            self.check_pending()
            names = [n for n in names if n in self.loaded]
        if not names:
            failed = [f for f in self.failed if f.name in {ep.name for ep in eps}]
            raise PluginError(failed[-1].error if failed else f"distribution {distribution!r} did not load")
        self.configure(config, only=set(names))
        self.register_tools(registry, config, cleanups, only=set(names))
        held = [h for h in self.held if h.name in names]
        if held:
            return held[0]
        loaded = self.loaded.get(names[0])
        if loaded is None:
            failed = [f for f in self.failed if f.name in names]
            raise PluginError(failed[-1].error if failed else f"distribution {distribution!r} did not load")
        return loaded

    def _unload(self, name: str, package: str, registry: ToolRegistry) -> None:
        """Withdraw a loaded plugin's tools and hooks and forget its modules, so a new version can load."""
        plugin = self.loaded.pop(name)
        for tool_name in plugin.tools:
            registry.unregister(tool_name)
        registered = self._pm.get_plugin(name)
        if registered is not None:
            self._pm.unregister(registered, name=name)
        self._registered.discard(name)
        self.held = [h for h in self.held if h.name != name]
        for module in [m for m in sys.modules if m == package or m.startswith(package + ".")]:
            del sys.modules[module]

    def adds(self, name: str, registry: ToolRegistry) -> dict[str, Any]:
        """What the loaded plugin ``name`` adds (entry points, tools with facts, hooks), for trust records."""
        loaded = self.loaded[name]
        dist = loaded.distribution or name
        names = [name]
        if loaded.distribution:
            names = [n for n, p in self.loaded.items() if p.distribution == loaded.distribution]
        tools = [e for e in registry if e.source.type == "plugin" and e.source.plugin_id in names]
        hooks: list[str] = []
        for n in names:
            plugin = self._pm.get_plugin(n)
            hooks.extend(impl.name for impl in self._pm.get_hookcallers(plugin) or [] if plugin is not None)
        return plugin_adds(dist, loaded.version, names, tools, hooks)

    def _check_trusted(self, name: str, registry: ToolRegistry) -> None:
        """Withdraw the tools of a trusted plugin that no longer adds what was approved."""
        loaded = self.loaded.get(name)
        if self.trust is None or loaded is None or loaded.distribution is None:
            return
        record = self.trust.get(loaded.distribution)
        if record is None or record.status != "trusted":
            return
        siblings = [n for n, p in self.loaded.items() if p.distribution == loaded.distribution]
        if any(n not in self._registered for n in siblings):
            return  # judged once every entry point of the distribution has registered
        if adds_digest(self.adds(name, registry)) == record.digest:
            return
        reason = "what it adds (tools, facts or hooks) changed since a human approved it; approve it again"
        for n in siblings:
            plugin = self.loaded.pop(n)
            for tool_name in plugin.tools:
                registry.unregister(tool_name)
            self.held.append(HeldPlugin(n, plugin.distribution, plugin.version, reason))
            registered = self._pm.get_plugin(n)
            if registered is not None:
                self._pm.unregister(registered, name=n)
        log.warning("plugin distribution %s is held back: %s", loaded.distribution, reason)

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

    def _impls(self, hook: str) -> list[Any]:
        # get_hookimpls() lists implementations in registration order (pluggy *calls* them LIFO);
        # we call them one by one in registration order so failures stay isolated and predictable.
        caller = getattr(self._pm.hook, hook, None)
        return list(caller.get_hookimpls()) if caller is not None else []

    def configure(self, config: AlephConfig, only: set[str] | None = None) -> None:
        """Run ``aleph_configure`` for each plugin (or those in ``only``), isolating failures."""
        for impl in self._impls("aleph_configure"):
            if only is not None and impl.plugin_name not in only:
                continue
            try:
                impl.function(**_kwargs(impl, config=config))
            except Exception as exc:
                self._fail(impl.plugin_name, "configure", exc)

    def register_tools(
        self, registry: ToolRegistry, config: AlephConfig, cleanups: list[Cleanup], only: set[str] | None = None
    ) -> None:
        """Run ``aleph_register_tools`` for each plugin (or those in ``only``).

        A failing plugin's tools are rolled back; a trusted plugin that no longer adds what was approved
        has its tools withdrawn and is held back.
        """
        self._parts = (registry, config, cleanups)
        for name in only if only is not None else self.loaded:
            self._registered.discard(name)
        for impl in self._impls("aleph_register_tools"):
            name = impl.plugin_name
            if only is not None and name not in only:
                continue
            source = ToolSource.builtin() if name == "aleph" else ToolSource.plugin(name)
            registrar = ToolRegistrar(registry, source, name)
            mark = len(cleanups)
            try:
                context = PluginContext(config, name, cleanups, self)
                call_retrying(
                    name,
                    lambda: impl.function(**_kwargs(impl, register=registrar, context=context)),  # noqa: B023
                    lambda: _roll_back(registry, registrar, cleanups, mark),  # noqa: B023
                )
            except Exception as exc:
                for tool_name in registrar.names:
                    registry.unregister(tool_name)
                del cleanups[mark:]
                self._fail(name, "register", exc)
                continue
            if registrar.held and self.strict:
                held = "; ".join(f"{tool}: {why}" for tool, why in registrar.held.items())
                raise PluginError(f"plugin {name!r} registered tools that break the tool contract: {held}")
            if name in self.loaded:
                self.loaded[name].tools.extend(registrar.names)
                self.loaded[name].held_tools.update(registrar.held)
                self._registered.add(name)
                self._check_trusted(name, registry)
        for name in list(only if only is not None else self.loaded):
            if name in self.loaded and name not in self._registered:
                self._registered.add(name)  # implements no aleph_register_tools: judged on its hooks
                self._check_trusted(name, registry)

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
            "held": [h.to_json() for h in self.held],
        }


def inspect_distribution(config: AlephConfig, distribution: str, path: Path | None = None) -> dict[str, Any]:
    """What ``distribution`` would add (see :func:`aleph._plugins._trust.plugin_adds`).

    It is found by loading the distribution into a scratch plugin manager and registry that nothing
    else uses; its trust record is not consulted.

    This imports the plugin's code: run it where that is acceptable (``aleph plugins inspect`` in a
    separate process, or for a human who asked to approve it).
    """
    scratch = PluginManager(strict=False)
    registry = ToolRegistry()
    scratch._parts = (registry, config, [])
    loaded = scratch.load_distribution(distribution, path)
    if isinstance(loaded, HeldPlugin):  # a scratch manager has no trust records; kept for the type
        raise PluginError(f"{distribution} is held back: {loaded.reason}")
    if scratch.failed:
        failure = scratch.failed[-1]
        raise PluginError(f"plugin {failure.name!r} failed to {failure.stage}: {failure.error}")
    return scratch.adds(loaded.name, registry)
