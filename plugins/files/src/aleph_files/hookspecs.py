"""The files family's own extension point: web-search backends for the ``search`` tool.

The plugin module lists this module in ``ALEPH_HOOKSPECS``, so Aleph's plugin manager knows the hook
whenever aleph-files is installed; a plugin implementing it without aleph-files present is reported as
implementing an unknown hook.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import pluggy

__all__ = ["aleph_search_providers"]

hookspec = pluggy.HookspecMarker("aleph")


@hookspec
def aleph_search_providers(
    register: Callable[[str, Callable[[str, int], Awaitable[list[Mapping[str, Any]]]]], None],
) -> None:
    """Called when the ``search`` tool is registered, to collect web-search backends from every plugin.

    :param register: call ``register(name, search)`` once per backend. ``search(query, max_results)`` is an
        async callable returning at most ``max_results`` mappings with ``title``, ``url`` and ``snippet``;
        it may do I/O (it runs at call time, not in the hook). A name registered twice is an error.
    The result is ignored. Without any backend (and no ``[files] searxng_url``) ``search`` reports
    "search not available".
    """
