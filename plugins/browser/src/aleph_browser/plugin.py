"""The ``browser`` plugin: registers the browser_* tools over one shared :class:`BrowserManager`."""

from __future__ import annotations

import aleph
from aleph_browser._config import BrowserConfig
from aleph_browser._manager import BrowserManager
from aleph_browser._tools_exec import BrowserExec
from aleph_browser._tools_page import (
    BrowserClick,
    BrowserDialog,
    BrowserDrag,
    BrowserFillForm,
    BrowserHover,
    BrowserNavigate,
    BrowserOpen,
    BrowserPressKey,
    BrowserScroll,
    BrowserSelect,
    BrowserSnapshot,
    BrowserType,
    BrowserUpload,
    BrowserWaitFor,
)
from aleph_browser._tools_state import (
    BrowserConsole,
    BrowserCookies,
    BrowserEmulate,
    BrowserEvaluate,
    BrowserNetwork,
    BrowserPdf,
    BrowserProfile,
    BrowserResize,
    BrowserScreenshot,
    BrowserSession,
    BrowserTabs,
)

__all__ = ["TOOLS", "aleph_register_tools"]

TOOLS = (
    BrowserOpen,
    BrowserNavigate,
    BrowserSnapshot,
    BrowserClick,
    BrowserType,
    BrowserFillForm,
    BrowserSelect,
    BrowserPressKey,
    BrowserHover,
    BrowserDrag,
    BrowserScroll,
    BrowserUpload,
    BrowserDialog,
    BrowserWaitFor,
    BrowserEvaluate,
    BrowserConsole,
    BrowserNetwork,
    BrowserTabs,
    BrowserScreenshot,
    BrowserPdf,
    BrowserResize,
    BrowserEmulate,
    BrowserCookies,
    BrowserSession,
    BrowserProfile,
    BrowserExec,
)
"""Every browser tool class, in the order they are registered."""


@aleph.hookimpl
def aleph_register_tools(register: aleph.ToolRegistrar, context: aleph.PluginContext) -> None:
    """Validate ``[browser]``, create the runtime's shared manager and register the tools over it."""
    config = context.config.section("browser", BrowserConfig)
    manager = BrowserManager(config, context.workspace, context.data_dir, context.protected_paths)
    context.add_cleanup(manager.aclose)
    register(*(tool(manager) for tool in TOOLS))
