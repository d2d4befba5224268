"""Which agent owns each session key: bound the first time a key is used, never moved after.

A session key names a conversation, its approvals, its event log and whatever families keep for it
(memory, notes). The first principal to use a key owns it; afterwards every other agent is refused it
exactly as if it did not exist. The table lives in ``<data_dir>/session_owners.sqlite3``; bindings are
cached in memory (they never change, so the cache cannot go stale).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

__all__ = ["MAX_SESSION_KEY", "SessionOwners"]

MAX_SESSION_KEY = 512
"""Longest session key accepted (characters)."""

_CACHE_LIMIT = 4096


class SessionOwners:
    """The session key → owning agent table (one per data directory; thread-safe)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._cache: dict[str, str] = {}

    def _db(self) -> sqlite3.Connection | None:
        if self.path is None:
            return None
        if self._conn is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(
                "CREATE TABLE IF NOT EXISTS session_owner"
                " (key TEXT PRIMARY KEY, owner TEXT NOT NULL, at_ms INTEGER NOT NULL) WITHOUT ROWID"
            )
            self._conn = conn
        return self._conn

    def claim(self, key: str, owner: str) -> str:
        """Bind ``key`` to ``owner`` unless it is bound already; returns the owner it is bound to.

        Raises ``ValueError`` for an empty or over-long key. Atomic across processes (one
        ``INSERT OR IGNORE`` then a read), so two agents racing for a new key get one owner.
        """
        if not key or len(key) > MAX_SESSION_KEY:
            raise ValueError(f"a session key must be 1 to {MAX_SESSION_KEY} characters")
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        with self._lock:
            db = self._db()
            if db is None:
                bound = self._cache.setdefault(key, owner)
            else:
                db.execute(
                    "INSERT OR IGNORE INTO session_owner (key, owner, at_ms) VALUES (?, ?, ?)",
                    (key, owner, time.time_ns() // 1_000_000),
                )
                row = db.execute("SELECT owner FROM session_owner WHERE key = ?", (key,)).fetchone()
                bound = str(row[0])
            if db is not None and len(self._cache) >= _CACHE_LIMIT:
                self._cache.clear()  # only a cache when the table is on disk: without one it is the table
            self._cache[key] = bound
            return bound

    def owner_of(self, key: str) -> str | None:
        """The agent ``key`` is bound to, or None when nobody has used it."""
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        with self._lock:
            db = self._db()
            if db is None:
                return None
            row = db.execute("SELECT owner FROM session_owner WHERE key = ?", (key,)).fetchone()
            return None if row is None else str(row[0])

    def close(self) -> None:
        """Close the database connection (reopened on next use)."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
