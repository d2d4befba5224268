"""The family's store: one SQLite file, every row owned by a principal and filtered in one place.

Tables: ``agents`` (who created which agent), ``secrets`` (vault entries, encrypted), ``changes``
(configuration changes with the text before and after, for ``rollback_config``), ``routes`` (the
gateway's routing table, install-wide) and ``choices`` (a session's model). :meth:`AdminStore.owned`
is the only place an owner's rows are selected: a row of another owner answers exactly like a missing one.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["AdminStore"]

_SCHEMA_VERSION = 1
_SCHEMA = """
CREATE TABLE IF NOT EXISTS agents (
    name TEXT PRIMARY KEY, owner TEXT NOT NULL, created_by TEXT NOT NULL, created_at REAL NOT NULL,
    description TEXT NOT NULL DEFAULT '', layer TEXT NOT NULL DEFAULT '{}');
CREATE TABLE IF NOT EXISTS secrets (
    owner TEXT NOT NULL, name TEXT NOT NULL, blob BLOB NOT NULL, rule TEXT NOT NULL,
    created_at REAL NOT NULL, updated_at REAL NOT NULL, PRIMARY KEY (owner, name));
CREATE TABLE IF NOT EXISTS changes (
    id INTEGER PRIMARY KEY AUTOINCREMENT, at REAL NOT NULL, by TEXT NOT NULL, kind TEXT NOT NULL,
    path TEXT NOT NULL, before TEXT NOT NULL, after TEXT NOT NULL, summary TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS routes (key TEXT PRIMARY KEY, agent TEXT NOT NULL, set_by TEXT NOT NULL, at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS choices (
    session TEXT PRIMARY KEY, owner TEXT NOT NULL, model TEXT NOT NULL, at REAL NOT NULL);
"""


class AdminStore:
    """Thread-safe access to ``<data_dir>/admin/admin.sqlite3`` (WAL, created 0600 on first use)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            if not self.path.exists():
                self.path.touch(mode=0o600)
            db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA busy_timeout=5000")
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version > _SCHEMA_VERSION:
                db.close()
                raise RuntimeError(f"{self.path}: schema {version} is newer than this aleph-admin ({_SCHEMA_VERSION})")
            db.executescript(_SCHEMA)
            db.execute(f"PRAGMA user_version={_SCHEMA_VERSION}")
            self._db = db
        return self._db

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            db = self._conn()
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    def close(self) -> None:
        """Close the connection (the next use reopens it)."""
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    # -- the one ownership filter ------------------------------------------------------------

    def owned(self, table: str, owner: str, name: str | None = None) -> list[sqlite3.Row]:
        """``owner``'s rows of ``table`` (``agents`` or ``secrets``), or its row named ``name``; nobody else's."""
        column = {"agents": "owner", "secrets": "owner"}[table]
        sql = f"SELECT * FROM {table} WHERE {column} = ?"
        params: list[Any] = [owner]
        if name is not None:
            sql += " AND name = ?"
            params.append(name)
        with self._lock:
            db = self._conn()
            db.row_factory = sqlite3.Row
            try:
                return list(db.execute(sql + " ORDER BY name", params))
            finally:
                db.row_factory = None

    # -- agents ------------------------------------------------------------------------------

    def agent_exists(self, name: str) -> bool:
        """Whether any principal created an agent ``name`` (names are install-wide)."""
        with self._lock:
            return self._conn().execute("SELECT 1 FROM agents WHERE name = ?", (name,)).fetchone() is not None

    def add_agent(self, name: str, owner: str, created_by: str, description: str, layer: dict[str, Any]) -> None:
        """Record an agent ``owner`` created."""
        with self._tx() as db:
            db.execute(
                "INSERT INTO agents VALUES (?, ?, ?, ?, ?, ?)",
                (name, owner, created_by, time.time(), description, json.dumps(layer, sort_keys=True)),
            )

    def update_agent(self, owner: str, name: str, description: str) -> bool:
        """Change the description of ``owner``'s agent; False when it has none by that name."""
        with self._tx() as db:
            return (
                db.execute(
                    "UPDATE agents SET description = ? WHERE owner = ? AND name = ?", (description, owner, name)
                ).rowcount
                == 1
            )

    def remove_agent(self, owner: str, name: str) -> bool:
        """Forget ``owner``'s agent ``name``; False when it has none by that name."""
        with self._tx() as db:
            return db.execute("DELETE FROM agents WHERE owner = ? AND name = ?", (owner, name)).rowcount == 1

    # -- secrets -----------------------------------------------------------------------------

    def put_secret(self, owner: str, name: str, blob: bytes, rule: dict[str, Any]) -> bool:
        """Store (or replace) a secret; True when it was new."""
        now = time.time()
        with self._tx() as db:
            new = db.execute("SELECT 1 FROM secrets WHERE owner = ? AND name = ?", (owner, name)).fetchone() is None
            db.execute(
                "INSERT INTO secrets VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(owner, name) DO UPDATE SET "
                "blob = excluded.blob, rule = excluded.rule, updated_at = excluded.updated_at",
                (owner, name, blob, json.dumps(rule, sort_keys=True), now, now),
            )
            return new

    def set_secret_rule(self, owner: str, name: str, rule: dict[str, Any]) -> bool:
        """Replace the rule of ``owner``'s secret; False when it has none by that name."""
        with self._tx() as db:
            return (
                db.execute(
                    "UPDATE secrets SET rule = ?, updated_at = ? WHERE owner = ? AND name = ?",
                    (json.dumps(rule, sort_keys=True), time.time(), owner, name),
                ).rowcount
                == 1
            )

    def remove_secret(self, owner: str, name: str) -> bool:
        """Delete ``owner``'s secret ``name``; False when it has none by that name."""
        with self._tx() as db:
            return db.execute("DELETE FROM secrets WHERE owner = ? AND name = ?", (owner, name)).rowcount == 1

    # -- configuration changes ---------------------------------------------------------------

    def add_change(self, by: str, kind: str, path: str, before: str, after: str, summary: str) -> int:
        """Record a change of the managed configuration; returns its id."""
        with self._tx() as db:
            cur = db.execute(
                "INSERT INTO changes (at, by, kind, path, before, after, summary) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (time.time(), by, kind, path, before, after, summary),
            )
            return int(cur.lastrowid or 0)

    def change(self, change_id: int) -> dict[str, Any] | None:
        """One recorded change, or None."""
        rows = self.changes(change_id=change_id)
        return rows[0] if rows else None

    def changes(self, limit: int = 50, change_id: int | None = None) -> list[dict[str, Any]]:
        """The newest changes first (install-wide: configuration belongs to the operator)."""
        sql = "SELECT id, at, by, kind, path, before, after, summary FROM changes"
        params: tuple[Any, ...] = ()
        if change_id is not None:
            sql += " WHERE id = ?"
            params = (change_id,)
        with self._lock:
            rows = self._conn().execute(sql + " ORDER BY id DESC LIMIT ?", (*params, limit)).fetchall()
        keys = ("id", "at", "by", "kind", "path", "before", "after", "summary")
        return [dict(zip(keys, row, strict=True)) for row in rows]

    # -- routes and model choices ------------------------------------------------------------

    def routes(self) -> dict[str, str]:
        """The routing table: channel or conversation key → agent."""
        with self._lock:
            return dict(self._conn().execute("SELECT key, agent FROM routes ORDER BY key").fetchall())

    def set_route(self, key: str, agent: str | None, by: str) -> None:
        """Route ``key`` to ``agent`` (None removes the route)."""
        with self._tx() as db:
            if agent is None:
                db.execute("DELETE FROM routes WHERE key = ?", (key,))
            else:
                db.execute(
                    "INSERT INTO routes VALUES (?, ?, ?, ?) ON CONFLICT(key) DO UPDATE SET agent = excluded.agent, "
                    "set_by = excluded.set_by, at = excluded.at",
                    (key, agent, by, time.time()),
                )

    def model_choice(self, session: str) -> str | None:
        """The model chosen for ``session``, if any."""
        with self._lock:
            row = self._conn().execute("SELECT model FROM choices WHERE session = ?", (session,)).fetchone()
        return None if row is None else str(row[0])

    def choose_model(self, session: str, owner: str, model: str) -> None:
        """Remember ``model`` for ``session`` (whose owner the caller has checked)."""
        with self._tx() as db:
            db.execute(
                "INSERT INTO choices VALUES (?, ?, ?, ?) ON CONFLICT(session) DO UPDATE SET model = excluded.model, "
                "owner = excluded.owner, at = excluded.at",
                (session, owner, model, time.time()),
            )
