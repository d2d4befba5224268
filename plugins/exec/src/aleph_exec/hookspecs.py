"""The exec family's own extension point: image-generation backends for the ``image_generate`` tool.

The plugin module lists this module in ``ALEPH_HOOKSPECS``, so Aleph's plugin manager knows the hook
whenever aleph-exec is installed; a plugin implementing it without aleph-exec present is reported as
implementing an unknown hook.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pluggy

__all__ = ["aleph_image_providers"]

hookspec = pluggy.HookspecMarker("aleph")


@hookspec
def aleph_image_providers(register: Callable[[str, Callable[[str, str], Awaitable[bytes]]], None]) -> None:
    """Called when the ``image_generate`` tool is registered, to collect image-generation backends.

    :param register: call ``register(name, generate)`` once per backend. ``generate(prompt, size)`` is an
        async callable (``size`` like ``"512x512"``) returning the encoded image bytes (PNG or JPEG); it
        runs at call time and may do I/O. A name registered twice is an error.
    The result is ignored. Without any provider ``image_generate`` reports "image generation not available".
    """
