"""One-time approvals: an answer carried by a framework is spent by the call it approved.

A framework that suspends on an ask keeps the human's answer in its own state (an OpenAI Agents
``RunState``, pydantic-ai's deferred results, a LangGraph checkpoint) and hands it back when the run
resumes. That state can be saved and resumed twice, or replayed from an old checkpoint: without a
record of use, the same "yes" would run the call again. So such an answer carries a one-time id (the
principal, session, tool call id and the call's fingerprint, hashed), and the gate records the id as
used, durably and atomically, before the call runs; an id already on record is never an approval again.

The record is ``<data_dir>/approvals/used.sqlite`` (WAL), shared by every process on that data directory;
without a data directory it is kept in memory. Rows older than a year are pruned.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
import time
from pathlib import Path

__all__ = ["OnceLedger", "once_id"]

_RETENTION_S = 400 * 86_400
_PRUNE_EVERY = 1000


def once_id(*parts: str | None) -> str:
    """The one-time id of an answer: SHA-256 over the length-prefixed ``parts`` (None and "" differ)."""
    digest = hashlib.sha256(b"aleph-once-v1")
    for part in parts:
        raw = b"\xff" if part is None else part.encode("utf-8", "surrogatepass")
        digest.update(len(raw).to_bytes(8, "big") + raw)
    return digest.hexdigest()


class OnceLedger:
    """Which one-time approval ids were used. Thread- and process-safe."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._memory: set[str] = set()
        self._db: sqlite3.Connection | None = None
        self._writes = 0

    def _connect(self) -> sqlite3.Connection:
        if self._db is None:
            assert self.path is not None
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("CREATE TABLE IF NOT EXISTS used (id TEXT PRIMARY KEY, at REAL NOT NULL) WITHOUT ROWID")
            self._db = db
        return self._db

    def consume(self, answer_id: str) -> bool:
        """Record ``answer_id`` as used; True the first time, False if it was used before (by any process)."""
        with self._lock:
            if self.path is None:
                if answer_id in self._memory:
                    return False
                self._memory.add(answer_id)
                return True
            db = self._connect()
            now = time.time()
            inserted = db.execute("INSERT OR IGNORE INTO used (id, at) VALUES (?, ?)", (answer_id, now)).rowcount
            self._writes += 1
            if self._writes % _PRUNE_EVERY == 0:
                db.execute("DELETE FROM used WHERE at < ?", (now - _RETENTION_S,))
            return inserted == 1

    def close(self) -> None:
        """Close the database connection."""
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None
