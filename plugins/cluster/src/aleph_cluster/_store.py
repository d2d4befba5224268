"""The center's record of nodes: which an operator joined, the identity key it pinned, tags, drain state.

SQLite (WAL) at ``<data_dir>/cluster.db``, schema versioned. A worker the scheduler knows but the store
does not is *pending*: it takes no calls until an operator joins it (``node_manage join``), which pins
the node's reply-signing key; a later reply signed by any other key is refused. Nodes are cluster-wide
state managed by the operator, not owned by a principal.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["NodeRecord", "NodeStore"]

_SCHEMA_VERSION = 1
_SCHEMA = """
CREATE TABLE IF NOT EXISTS nodes (
    name TEXT PRIMARY KEY,
    identity_key TEXT NOT NULL,
    tags TEXT NOT NULL DEFAULT '[]',
    draining INTEGER NOT NULL DEFAULT 0,
    joined_ms INTEGER NOT NULL
);
"""


@dataclass(frozen=True, slots=True)
class NodeRecord:
    """A node an operator joined."""

    name: str
    identity_key: bytes
    tags: tuple[str, ...]
    draining: bool
    joined_ms: int


class NodeStore:
    """Thread-safe access to ``cluster.db``; every method is one short transaction."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._lock = threading.Lock()
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA busy_timeout=5000")
            version = self._db.execute("PRAGMA user_version").fetchone()[0]
            if version > _SCHEMA_VERSION:
                raise RuntimeError(f"{path} has schema {version}; this aleph-cluster knows {_SCHEMA_VERSION}")
            self._db.executescript(_SCHEMA)
            self._db.execute(f"PRAGMA user_version={_SCHEMA_VERSION}")

    def close(self) -> None:
        """Close the database."""
        with self._lock:
            self._db.close()

    def all(self) -> dict[str, NodeRecord]:
        """Every joined node by name."""
        with self._lock:
            rows = self._db.execute("SELECT name, identity_key, tags, draining, joined_ms FROM nodes").fetchall()
        return {r[0]: NodeRecord(r[0], bytes.fromhex(r[1]), tuple(json.loads(r[2])), bool(r[3]), r[4]) for r in rows}

    def get(self, name: str) -> NodeRecord | None:
        """The joined node ``name``, or None."""
        return self.all().get(name)

    def join(self, name: str, identity_key: bytes, tags: list[str]) -> NodeRecord:
        """Record ``name`` as joined with its pinned key; a re-join keeps nothing of the old record."""
        now = int(time.time() * 1000)
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO nodes(name, identity_key, tags, draining, joined_ms) VALUES (?,?,?,0,?)",
                (name, identity_key.hex(), json.dumps(tags), now),
            )
        return NodeRecord(name, identity_key, tuple(tags), False, now)

    def set_tags(self, name: str, tags: list[str]) -> None:
        """Replace the node's tags."""
        with self._lock:
            self._db.execute("UPDATE nodes SET tags=? WHERE name=?", (json.dumps(tags), name))

    def set_draining(self, name: str, draining: bool) -> None:
        """Mark the node draining (no new calls) or not."""
        with self._lock:
            self._db.execute("UPDATE nodes SET draining=? WHERE name=?", (int(draining), name))

    def forget(self, name: str) -> bool:
        """Remove the node (it left); True when it was joined."""
        with self._lock:
            return self._db.execute("DELETE FROM nodes WHERE name=?", (name,)).rowcount > 0
