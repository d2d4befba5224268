"""The memory family's own hooks (added to Aleph's plugin manager when ``aleph-memory`` loads).

Implement them with ``@aleph.hookimpl`` in any plugin; they are called once per runtime, when the
memory tools are registered. Like every Aleph hook they only register: the work happens at call time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from aleph_memory._providers import EmbedderFactory, Summariser

__all__ = ["aleph_memory_embedders", "aleph_memory_summarisers", "hookspec"]

hookspec = pluggy.HookspecMarker("aleph")
"""Marks this family's hook specifications for Aleph's plugin manager (project ``aleph``)."""


@hookspec
def aleph_memory_embedders(register: Callable[[str, EmbedderFactory], None]) -> None:
    """Called once per runtime, when the memory tools are registered, to collect text embedders.

    :param register: call ``register(name, factory)`` once per embedder. ``factory()`` returns an
        :class:`aleph_memory.Embedder` (``name``, ``dim``, ``embed(texts) -> vectors``); it is called the
        first time the embedder is needed, so a model loads only when used. A name registered twice is an error.
    The result is ignored. ``[memory] embedder = "<name>"`` picks one; without it search is lexical.
    """


@hookspec
def aleph_memory_summarisers(register: Callable[[str, Summariser], None]) -> None:
    """Called once per runtime, when the memory tools are registered, to collect summarisers.

    :param register: call ``register(name, summarise)`` once per summariser. ``summarise(texts, instructions)``
        is an async callable returning a summary of ``texts`` (a list of strings) following the optional
        ``instructions``; it runs at call time and may do I/O (an LLM). A name registered twice is an error.
    The result is ignored. ``session_compact`` and ``memory_reflect`` use ``[memory] summariser`` (or the only
    one registered); without one they report "summariser not available".
    """
