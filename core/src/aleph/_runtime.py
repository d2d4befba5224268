"""The runtime: configuration, plugins, registry and per-request tool services in one object."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from types import TracebackType
from typing import Any

from aleph._config import AlephConfig, load_config
from aleph._plugins import Cleanup, PluginManager
from aleph._registry import RegisteredTool, ToolRegistry
from aleph._service import ToolService, UnscopedToolService
from aleph._tool import Tool
from aleph._types import ToolSource

__all__ = ["Aleph", "load"]

log = logging.getLogger("aleph")


def _plugin_name(plugin: object) -> str:
    name = getattr(plugin, "ALEPH_PLUGIN_NAME", None) or getattr(plugin, "__name__", None)
    return str(name or type(plugin).__name__)


class Aleph:
    """A loaded Aleph: use as ``async with aleph.load() as rt:`` and ask it for tool services.

    The CLI and ``aleph serve`` are thin layers over this object.
    """

    def __init__(
        self, config: AlephConfig, plugins: PluginManager, registry: ToolRegistry, cleanups: list[Cleanup]
    ) -> None:
        self.config = config
        self.plugins = plugins
        self.registry = registry
        self._cleanups = cleanups
        self._closed = False

    async def __aenter__(self) -> Aleph:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Release every resource plugins registered (browsers, connections); safe to call twice."""
        if self._closed:
            return
        self._closed = True
        while self._cleanups:
            cleanup = self._cleanups.pop()
            try:
                await cleanup()
            except Exception:
                log.exception("a plugin cleanup failed")

    def register(self, tool: Tool, *, source: ToolSource | None = None) -> RegisteredTool:
        """Add one tool owned by the program itself."""
        return self.registry.register(tool, source=source or ToolSource.plugin("__main__"))

    def tool_service(
        self,
        agent: str | None = None,
        channel: str | None = None,
        turn: Any = None,
        requester: Any = None,
        tier: str | None = None,
    ) -> ToolService:
        """The tool service for one request."""
        return UnscopedToolService(self.registry)


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
    if strict is None:
        strict = os.environ.get("ALEPH_STRICT_PLUGINS", "") not in ("", "0") or config.plugins.strict
    disabled = set(config.plugins.disable)
    disabled.update(n.strip() for n in os.environ.get("ALEPH_DISABLE_PLUGINS", "").split(",") if n.strip())
    manager = PluginManager(strict=strict, disabled=disabled)
    for plugin in plugins:
        manager.add(plugin, _plugin_name(plugin))
    if entry_points:
        manager.load_entry_points()
    manager.configure(config)
    registry = ToolRegistry()
    cleanups: list[Cleanup] = []
    manager.register_tools(registry, config, cleanups)
    return Aleph(config, manager, registry, cleanups)
