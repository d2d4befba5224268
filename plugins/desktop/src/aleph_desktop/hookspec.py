"""The desktop family's own hooks: plugins provide vision locators for ``desktop_gui_locate``.

The family adds this module to Aleph's plugin manager when it loads, so a third-party plugin can
implement the hook without core knowing about the desktop family::

    @aleph.hookimpl
    def aleph_desktop_vision_locators(register):
        register("my-model", locate)   # async locate(image, description) -> list of boxes
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pluggy

__all__ = ["aleph_desktop_vision_locators"]

hookspec = pluggy.HookspecMarker("aleph")


@hookspec
def aleph_desktop_vision_locators(register: Callable[[str, Callable[[Any, str], Awaitable[Any]]], None]) -> None:
    """Called when the desktop tools are registered, to collect vision locators for ``desktop_gui_locate``.

    :param register: call ``register(name, locate)`` once per locator. ``await locate(image, description)``
        gets a PIL image of the screen and the text the model asked for, and returns a list of
        ``{"x", "y", "width", "height", "score", "text"?}`` dicts in that image's pixels (best first).
        It runs at call time and may do I/O. A name registered twice is an error.
    The result is ignored. Without any locator, ``by="vision"`` reports "vision locator not available".
    """
