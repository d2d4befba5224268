"""The deferred tier: tools that are callable and searchable but not listed until a search promotes them."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator

__all__ = ["DeferredSet"]


class DeferredSet:
    """Names of deferred tools, shared by every tool service of one session.

    Supports ``name in deferred`` and an int :attr:`generation` (what ``ScopedToolService`` needs).
    A promoted tool never returns: :meth:`undefer` only removes, and :meth:`admit` adds only names
    it has never seen (tools that appear later, e.g. through an MCP ``list_changed``).
    """

    def __init__(self, names: Iterable[str] = ()) -> None:
        self._names = set(names)
        self._seen = set(self._names)
        self._lock = threading.Lock()
        self.generation = 0
        """Bumped whenever membership changes; list caches key on it."""

    def __contains__(self, name: object) -> bool:
        return name in self._names

    def __len__(self) -> int:
        return len(self._names)

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._names))

    def undefer(self, names: Iterable[str]) -> list[str]:
        """Promote ``names`` (atomically); returns those actually removed. A no-op keeps the generation."""
        with self._lock:
            removed = sorted(n for n in set(names) if n in self._names)
            if removed:
                self._names.difference_update(removed)
                self.generation += 1
            return removed

    def admit(self, candidates: Iterable[str], defer: Iterable[str]) -> list[str]:
        """Mark ``candidates`` as seen; those never seen before and also in ``defer`` start deferred."""
        wanted = set(defer)
        with self._lock:
            fresh = [n for n in candidates if n not in self._seen]
            self._seen.update(fresh)
            added = sorted(n for n in fresh if n in wanted)
            if added:
                self._names.update(added)
                self.generation += 1
            return added
