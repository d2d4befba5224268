"""Aleph's hook specifications (pluggy project ``aleph``, entry-point group ``aleph``).

Hooks are few, typed and synchronous: they register things and make decisions, and do no
I/O. Runtime behaviour lives on :class:`~aleph.ToolService`. Core never calls ``pm.hook``
directly; it goes through :class:`~aleph._plugins.PluginManager`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from aleph._config import AlephConfig
    from aleph._plugins import PluginContext, ToolRegistrar

__all__ = ["NAME", "hookimpl", "hookspec"]

NAME = "aleph"
hookspec = pluggy.HookspecMarker(NAME)
hookimpl = pluggy.HookimplMarker(NAME)


@hookspec(historic=True)
def aleph_configure(config: AlephConfig) -> None:
    """Called once, right after the configuration is loaded, for every plugin (late ones too).

    :param config: the validated configuration; read your own section with ``config.section(name, Model)``.
    Raise :class:`~aleph.ConfigError` for a bad section; the plugin is then recorded as failed.
    """


@hookspec
def aleph_register_tools(register: ToolRegistrar, context: PluginContext) -> None:
    """Called once per runtime to let a plugin add its tools.

    :param register: call ``register(tool, ...)`` with :class:`~aleph.AlephTool` or :class:`~aleph.LoopTool`
        instances; the registrar records that this plugin owns them. A name clash raises
        :class:`~aleph.DuplicateTool`, which fails this plugin only.
    :param context: the runtime's configuration, workspace and data directory, and
        ``context.add_cleanup(async_fn)`` for resources to release when the runtime closes.
    The result is ignored.
    """
