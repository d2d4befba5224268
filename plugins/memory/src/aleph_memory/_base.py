"""What every tool of the family shares: the runtime objects and a worker-thread hop for SQLite work."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

import anyio.to_thread

import aleph
from aleph_memory._memory import Memory

__all__ = ["FamilyTool", "Runtime", "in_thread"]

T = TypeVar("T")


class Runtime:
    """The family's per-runtime state handed to every tool."""

    def __init__(self, memory: Memory, context: aleph.PluginContext, notes: Any, sessions: Any) -> None:
        self.memory = memory
        self.context = context
        self.notes = notes
        self.sessions = sessions

    @property
    def ledger(self) -> Any:
        """The runtime's signed ledger, when core exposes it at call time (else None)."""
        try:
            return getattr(self.context, "ledger", None)
        except RuntimeError:
            return None

    @property
    def events(self) -> Any:
        """The runtime's session event log, when core exposes it at call time (else None)."""
        try:
            return getattr(self.context, "events", None)
        except RuntimeError:
            return None


async def in_thread(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run blocking SQLite or file work off the event loop (writers may wait on another process's lock)."""
    return await anyio.to_thread.run_sync(partial(fn, *args, **kwargs))


class FamilyTool(aleph.AlephTool[Any]):
    """Base of the family's tools: holds the :class:`Runtime`."""

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt

    @property
    def memory(self) -> Memory:
        """The memory service."""
        return self.rt.memory
