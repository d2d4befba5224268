"""The family's SQLite file: one connection per store, WAL, a versioned schema migrated on open.

Every write runs in ``BEGIN IMMEDIATE`` so writers in several processes queue on SQLite's lock
(``busy_timeout``) instead of failing; readers never block writers (WAL).
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

from aleph_memory._text import FTS_TOKENIZE

__all__ = ["SCHEMA_VERSION", "Database"]

SCHEMA_VERSION = 6

_V1 = f"""
CREATE TABLE IF NOT EXISTS items (
    rowid INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    agent TEXT NOT NULL,
    kind TEXT NOT NULL,
    content TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    subject TEXT,
    speaker TEXT,
    session TEXT,
    seq INTEGER,
    ref TEXT,
    source_turn TEXT,
    source_call TEXT,
    occurred_at INTEGER,
    created_at INTEGER NOT NULL,
    valid_from INTEGER NOT NULL,
    valid_to INTEGER,
    status TEXT NOT NULL,
    superseded_by TEXT,
    supersedes TEXT,
    stems TEXT NOT NULL,
    norm TEXT NOT NULL DEFAULT '',
    ctx_stems TEXT NOT NULL DEFAULT '',
    extra TEXT
);
CREATE UNIQUE INDEX IF NOT EXISTS items_one_active_fact ON items (agent, kind, content_hash)
    WHERE status = 'active' AND kind IN ('fact', 'correction');
CREATE INDEX IF NOT EXISTS items_by_subject ON items (agent, subject, status);
CREATE INDEX IF NOT EXISTS items_by_session ON items (session, seq);
CREATE INDEX IF NOT EXISTS items_by_agent ON items (agent, kind, status, rowid);
CREATE INDEX IF NOT EXISTS items_by_speaker ON items (agent, speaker);
CREATE INDEX IF NOT EXISTS items_by_time ON items (agent, occurred_at);
CREATE TABLE IF NOT EXISTS item_events (
    rowid INTEGER NOT NULL,
    agent TEXT NOT NULL,
    start INTEGER NOT NULL,
    end INTEGER NOT NULL,
    confidence REAL NOT NULL,
    said TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS item_events_by_time ON item_events (agent, start);
CREATE INDEX IF NOT EXISTS item_events_by_item ON item_events (rowid);
CREATE TABLE IF NOT EXISTS item_places (
    rowid INTEGER NOT NULL,
    agent TEXT NOT NULL,
    name TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS item_places_by_agent ON item_places (agent, rowid);
CREATE TABLE IF NOT EXISTS vectors (
    rowid INTEGER PRIMARY KEY,
    model TEXT NOT NULL,
    dim INTEGER NOT NULL,
    vector BLOB NOT NULL,
    stamp INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS context_vectors (
    rowid INTEGER PRIMARY KEY,
    model TEXT NOT NULL,
    stamp INTEGER NOT NULL,
    vector BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS context_vectors_by_stamp ON context_vectors (model, stamp);
CREATE TABLE IF NOT EXISTS provenance (
    rowid INTEGER PRIMARY KEY,
    memory_id TEXT NOT NULL,
    event TEXT NOT NULL,
    agent TEXT NOT NULL,
    session TEXT,
    turn TEXT,
    call_id TEXT,
    tool TEXT,
    at INTEGER NOT NULL,
    detail TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS provenance_by_memory ON provenance (memory_id, rowid);
CREATE INDEX IF NOT EXISTS provenance_by_session ON provenance (session, rowid);
CREATE TABLE IF NOT EXISTS decisions (
    rowid INTEGER PRIMARY KEY,
    agent TEXT NOT NULL,
    action TEXT NOT NULL,
    reason TEXT NOT NULL,
    subject TEXT NOT NULL,
    at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS decisions_by_agent ON decisions (agent, rowid);
CREATE TABLE IF NOT EXISTS sessions (
    key TEXT PRIMARY KEY,
    agent TEXT NOT NULL,
    topic TEXT,
    created_at INTEGER NOT NULL,
    last_active_at INTEGER NOT NULL,
    closed_at INTEGER,
    completed_at INTEGER,
    parent TEXT,
    message_count INTEGER NOT NULL DEFAULT 0,
    last_message_preview TEXT
);
CREATE TABLE IF NOT EXISTS messages (
    rowid INTEGER PRIMARY KEY,
    session TEXT NOT NULL,
    role TEXT NOT NULL,
    content TEXT NOT NULL,
    at INTEGER NOT NULL,
    compacted INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS messages_by_session ON messages (session, rowid);
CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts USING fts5(content, tokenize='{FTS_TOKENIZE}');
CREATE TABLE IF NOT EXISTS queue (
    id TEXT PRIMARY KEY,
    target TEXT NOT NULL,
    sender_session TEXT,
    sender_agent TEXT NOT NULL,
    content TEXT NOT NULL,
    at INTEGER NOT NULL,
    taken_at INTEGER
);
CREATE INDEX IF NOT EXISTS queue_by_target ON queue (target, taken_at, at);
"""


class Database:
    """One SQLite connection to ``path``, shared by threads under a lock (calls are short)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30.0)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute("PRAGMA busy_timeout=30000")
        self._conn.execute("PRAGMA foreign_keys=ON")
        # Search reads many scattered pages of a large store: map the file and keep a bigger cache.
        self._conn.execute("PRAGMA mmap_size=268435456")
        self._conn.execute("PRAGMA cache_size=-32768")
        self._migrate()

    def _migrate(self) -> None:
        version = self._conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise RuntimeError(
                f"{self.path} has memory schema {version}, newer than this aleph-memory ({SCHEMA_VERSION}):"
                " upgrade aleph-memory"
            )
        if version < SCHEMA_VERSION:
            # Every statement is IF NOT EXISTS, so processes opening a new file at once cannot collide, and
            # an older file gains what later versions added (2: the time index, 3: the turns' context vectors,
            # 4: event time, the intervals an item's own words resolve to, see _events; 5: the places an item
            # names, see _places; 6: a stamp on each vector, since the background worker writes them in no
            # fixed rowid order, see _vectorwork)
            # by running the same script.
            with self._lock:
                self._conn.executescript(_V1)
                columns = {row[1] for row in self._conn.execute("PRAGMA table_info(vectors)")}
                if "stamp" not in columns:
                    with contextlib.suppress(sqlite3.OperationalError):  # another process added it first
                        self._conn.execute("ALTER TABLE vectors ADD COLUMN stamp INTEGER NOT NULL DEFAULT 0")
                self._conn.execute("CREATE INDEX IF NOT EXISTS vectors_by_stamp ON vectors (model, stamp)")
                self._conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    @contextlib.contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """A write transaction (``BEGIN IMMEDIATE``): committed on exit, rolled back on any error."""
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    @contextlib.contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """The connection for reads (autocommit: each statement sees the newest committed state)."""
        with self._lock:
            yield self._conn

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._conn.close()
