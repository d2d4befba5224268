"""The channels family's own extension point: adapter kinds for ``[channel_adapters.<name>]``.

The plugin module lists this module in ``ALEPH_HOOKSPECS``, so Aleph's plugin manager knows the hook
whenever aleph-channels is installed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pluggy

__all__ = ["aleph_channel_adapters"]

hookspec = pluggy.HookspecMarker("aleph")


@hookspec
def aleph_channel_adapters(register: Callable[[str, Callable[[str, Mapping[str, Any], Path], Any]], None]) -> None:
    """Called once when the channels family loads, to collect adapter kinds beyond irc, email and webhook.

    :param register: call ``register(kind, factory)`` once per kind. ``factory(name, settings, data_dir)``
        gets the adapter's configured name, its ``[channel_adapters.<name>]`` table (``kind`` included) and a
        folder it may keep state in, and returns an object implementing
        :class:`aleph_channels.ChannelAdapter`; it raises ``ValueError`` naming a bad setting. A kind
        registered twice is an error naming both plugins.
    The result is ignored.
    """
