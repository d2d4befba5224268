"""The ``desktop`` plugin: registers the desktop tools over one shared :class:`Desktop` per runtime."""

from __future__ import annotations

from typing import Any

import aleph
from aleph_desktop import hookspec
from aleph_desktop._config import DesktopConfig
from aleph_desktop._desktop import Desktop, VisionLocator
from aleph_desktop._tools_ax import AxQueryByRole, AxQueryFocused, AxQueryTree, AxSnapshot
from aleph_desktop._tools_desktop import DesktopControl
from aleph_desktop._tools_vision import CheckPermissions, GuiLocate, SetOfMarks

__all__ = ["ALEPH_HOOKSPECS", "TOOLS", "aleph_register_tools"]

ALEPH_HOOKSPECS = (hookspec,)
"""The family's own hooks (vision locators), added to the plugin manager when this plugin loads."""

TOOLS = (
    DesktopControl,
    AxQueryFocused,
    AxQueryTree,
    AxQueryByRole,
    AxSnapshot,
    SetOfMarks,
    GuiLocate,
    CheckPermissions,
)
"""Every desktop tool class, in the order they are registered."""


@aleph.hookimpl
def aleph_register_tools(register: aleph.ToolRegistrar, context: aleph.PluginContext) -> None:
    """Validate ``[desktop]``, collect vision locators, and register the tools over one :class:`Desktop`."""
    config = context.config.section("desktop", DesktopConfig)
    locators: dict[str, VisionLocator] = {}

    def add_locator(name: str, locate: Any) -> None:
        if not isinstance(name, str) or not name or not callable(locate):
            raise ValueError("register(name, locate) needs a non-empty name and an async callable")
        if name in locators:
            raise ValueError(f"vision locator {name!r} is registered twice")
        locators[name] = locate

    context.call_hook("aleph_desktop_vision_locators", register=add_locator)
    desktop = Desktop(config, locators)
    context.add_cleanup(desktop.aclose)
    register(*(tool(desktop) for tool in TOOLS))
