"""Aleph's desktop tools: an X11 desktop on Linux, accessibility first (AT-SPI over D-Bus), XTEST input.

Install with ``pip install aleph-core aleph-desktop``; the tools register through the ``aleph`` entry
point ``desktop = "aleph_desktop.plugin"``. Configure them in the ``[desktop]`` section of
``aleph.toml`` (see :class:`DesktopConfig`). :class:`HeadlessSession` starts a private display and
accessibility bus for servers, tests and benchmarks.
"""

from __future__ import annotations

from aleph_desktop._config import DesktopConfig
from aleph_desktop._desktop import Desktop
from aleph_desktop.headless import HeadlessSession, SessionError

__version__ = "0.1.0"

__all__ = ["Desktop", "DesktopConfig", "HeadlessSession", "SessionError"]
