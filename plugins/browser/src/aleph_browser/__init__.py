"""Aleph's browser tools: Playwright for Python driving a real (Debian) Chromium.

Install with ``pip install aleph-core aleph-browser``; the tools register through the ``aleph``
entry point ``browser = "aleph_browser.plugin"``. Configure them in the ``[browser]`` section of
``aleph.toml`` (see :class:`BrowserConfig`).
"""

from __future__ import annotations

from aleph_browser._config import BrowserConfig
from aleph_browser._manager import BrowserManager
from aleph_browser._policy import OriginPattern, OriginPolicy

__version__ = "0.1.0"

__all__ = ["BrowserConfig", "BrowserManager", "OriginPattern", "OriginPolicy"]
