"""aleph-memory: memory, sessions and notes for Aleph agents.

The tools register through the ``aleph`` entry point. A host program uses :class:`MemoryStore` to
feed what the tools search (dialog turns, transcript messages) and to deliver queued session messages.
Embedders and summarisers plug in through this family's hooks (:mod:`aleph_memory.hookspec`).
"""

from __future__ import annotations

from aleph_memory._config import MemoryConfig
from aleph_memory._items import Item, NewItem
from aleph_memory._providers import Embedder, Summariser
from aleph_memory._store import MemoryStore

__all__ = ["Embedder", "Item", "MemoryConfig", "MemoryStore", "NewItem", "Summariser"]
