"""The host program's handle on a runtime's memory: ingest items, append transcripts, take queued messages."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aleph
from aleph_memory._config import MemoryConfig
from aleph_memory._items import Item, NewItem
from aleph_memory._memory import Memory
from aleph_memory._provenance import CallInfo
from aleph_memory._providers import Embedder, Providers
from aleph_memory._search import SearchResult
from aleph_memory._sessions import SessionStore

__all__ = ["MemoryStore"]


class MemoryStore:
    """The family's SQLite file opened by a host (a second connection beside the tools' own; WAL makes that safe).

    ``MemoryStore.of(rt)`` opens the store a runtime's tools use. Pass ``embedder`` to write vectors
    for what you ingest when the runtime searches with that embedder: a background worker computes them
    after ``ingest`` returns (:meth:`wait_for_vectors` waits for it), and at open it computes those of any
    item stored without them.
    """

    def __init__(self, path: Path, *, config: MemoryConfig | None = None, embedder: Embedder | None = None) -> None:
        providers = Providers(embedder.name if embedder else None, None)
        if embedder is not None:
            providers.add_embedder(embedder.name, lambda: embedder)
        self._memory = Memory(Path(path), config or MemoryConfig(), providers)
        self.sessions = SessionStore(self._memory.db)

    @classmethod
    def of(cls, rt: aleph.Aleph, *, embedder: Embedder | None = None) -> MemoryStore:
        """The store of runtime ``rt`` (``<data_dir>/memory/memory.sqlite``)."""
        config = rt.config.section("memory", MemoryConfig)
        return cls(rt.config.data_dir / "memory" / "memory.sqlite", config=config, embedder=embedder)

    def ingest(self, agent: str, items: Sequence[NewItem], *, session: str | None = None) -> list[Item]:
        """Store ``items`` for ``agent`` in one transaction (provenance event ``ingested``)."""
        return self._memory.store(CallInfo(agent, "ingest", None, session, None), items, "ingested")

    def wait_for_vectors(self, timeout: float | None = None) -> bool:
        """Wait until every stored item has its vectors; False on timeout or when the worker failed.

        Without an embedder there is nothing to wait for (True).
        """
        worker = self._memory.vectors
        return True if worker is None else worker.wait_idle(timeout)

    def search(self, agent: str, query: str, *, limit: int = 10) -> SearchResult:
        """What ``memory_search`` would return for ``agent``."""
        return self._memory.search(agent, query, limit=limit)

    def append_message(self, session: str, role: str, content: str, *, agent: str = "default") -> int:
        """Add a transcript message (searched by session_search, compacted by session_compact)."""
        return self.sessions.append_message(session, role, content, agent=agent)

    def take_queued(self, session: str, *, limit: int = 100) -> list[dict[str, Any]]:
        """Take the messages other sessions queued for ``session`` with ``session_send``."""
        return self.sessions.take_queued(session, limit=limit)

    def close(self) -> None:
        """Close the connection."""
        self._memory.close()
