"""The hub's SQLite store (``<data_dir>/hub.sqlite``, WAL): catalog, skill state, install receipts.

The schema is versioned with ``PRAGMA user_version`` and migrated on open. Every write is one
transaction, so a crash never leaves half a catalog sync or half a receipt.
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

__all__ = ["HubStore", "receipt_message"]

SCHEMA_VERSION = 3
"""2: skill pins and sealed receipts; 3: skill state is per owner (each principal enables, scopes, pins and
archives skills for itself)."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS catalog (
    id TEXT PRIMARY KEY,            -- "<index host>:<canonical name>"
    name TEXT NOT NULL,             -- canonical distribution name
    version TEXT NOT NULL,
    summary TEXT NOT NULL DEFAULT '',
    description TEXT NOT NULL DEFAULT '',
    keywords TEXT NOT NULL DEFAULT '',
    author TEXT NOT NULL DEFAULT '',
    entry_points TEXT NOT NULL DEFAULT '[]',
    project_urls TEXT NOT NULL DEFAULT '{}',
    index_url TEXT NOT NULL,
    wheel_url TEXT NOT NULL,
    wheel_sha256 TEXT NOT NULL,
    provenance_url TEXT,
    synced_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS skill_state (
    owner TEXT NOT NULL,            -- the principal whose choice this is (principal.owner)
    id TEXT NOT NULL,
    enabled INTEGER,
    scope TEXT,
    pinned INTEGER NOT NULL DEFAULT 0,
    archived INTEGER NOT NULL DEFAULT 0,
    uses INTEGER NOT NULL DEFAULT 0,
    views INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (owner, id)
);
CREATE TABLE IF NOT EXISTS skill_pins (
    location TEXT PRIMARY KEY,      -- the skill folder, resolved
    digest TEXT NOT NULL,           -- "sha256:..." of every entry of the folder a human approved
    seal TEXT NOT NULL,             -- HMAC of (location, digest) under the runtime's keystore secret
    approved_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS receipts (
    distribution TEXT PRIMARY KEY,  -- canonical name
    version TEXT NOT NULL,
    target TEXT NOT NULL,           -- "folder" | "environment"
    location TEXT NOT NULL,         -- the directory RECORD paths are relative to
    index_url TEXT NOT NULL,
    artifact TEXT NOT NULL,         -- JSON {url, sha256, filename}
    files TEXT NOT NULL,            -- JSON {relative path: sha256 hex}
    attestation TEXT NOT NULL DEFAULT '{}',
    requirement TEXT NOT NULL DEFAULT '',
    installed_at REAL NOT NULL,
    seal TEXT NOT NULL DEFAULT ''   -- HMAC of (distribution, location, files) under the runtime's keystore secret
);
"""

# Version 1 kept one state per skill for everyone; it becomes the default agent's ("main"), whose
# choices they were when no principal was known.
_TO_2 = """
CREATE TABLE skill_state_v2 (
    owner TEXT NOT NULL, id TEXT NOT NULL, enabled INTEGER, scope TEXT, pinned INTEGER NOT NULL DEFAULT 0,
    archived INTEGER NOT NULL DEFAULT 0, uses INTEGER NOT NULL DEFAULT 0, views INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (owner, id)
);
INSERT INTO skill_state_v2 (owner, id, enabled, scope, pinned, archived, uses, views)
    SELECT 'main', id, enabled, scope, pinned, archived, uses, views FROM skill_state;
DROP TABLE skill_state;
ALTER TABLE skill_state_v2 RENAME TO skill_state
"""


class HubStore:
    """One connection per store, serialised by a lock (calls run in worker threads)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA busy_timeout=5000")
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise RuntimeError(f"{path} has schema {version}, newer than this aleph-hub ({SCHEMA_VERSION}); upgrade")
        with self.transaction() as db:
            state = {row[1] for row in db.execute("PRAGMA table_info(skill_state)")}
            if version and state and "owner" not in state:  # before the new tables: skill state becomes per owner
                for statement in _TO_2.split(";"):
                    if statement.strip():
                        db.execute(statement)
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    db.execute(statement)
            columns = {row[1] for row in db.execute("PRAGMA table_info(receipts)")}
            if "seal" not in columns:  # schema 1: receipts had no seal (they verify as unsealed until re-taken)
                db.execute("ALTER TABLE receipts ADD COLUMN seal TEXT NOT NULL DEFAULT ''")
            db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """``BEGIN IMMEDIATE`` … ``COMMIT`` (``ROLLBACK`` on error) under the store's lock."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def query(self, sql: str, params: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
        """Rows of a read-only query."""
        with self._lock:
            return list(self._db.execute(sql, params))

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._db.close()

    # -- catalog ---------------------------------------------------------------------------

    def replace_catalog(self, index_url: str, entries: list[dict[str, Any]], *, complete: bool) -> None:
        """Upsert ``entries`` from ``index_url``; when ``complete``, drop that index's entries not among them."""
        now = time.time()
        with self.transaction() as db:
            for e in entries:
                db.execute(
                    "INSERT OR REPLACE INTO catalog (id, name, version, summary, description, keywords, author,"
                    " entry_points, project_urls, index_url, wheel_url, wheel_sha256, provenance_url, synced_at)"
                    " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                    (
                        e["id"],
                        e["name"],
                        e["version"],
                        e.get("summary", ""),
                        e.get("description", ""),
                        e.get("keywords", ""),
                        e.get("author", ""),
                        json.dumps(e.get("entry_points", [])),
                        json.dumps(e.get("project_urls", {})),
                        index_url,
                        e["wheel_url"],
                        e["wheel_sha256"],
                        e.get("provenance_url"),
                        now,
                    ),
                )
            if complete:
                keep = {e["id"] for e in entries}
                for (entry_id,) in db.execute("SELECT id FROM catalog WHERE index_url = ?", (index_url,)).fetchall():
                    if entry_id not in keep:
                        db.execute("DELETE FROM catalog WHERE id = ?", (entry_id,))

    def catalog(self) -> list[dict[str, Any]]:
        """Every catalog entry, by id."""
        return [_catalog_row(r) for r in self.query("SELECT * FROM catalog ORDER BY id")]

    def catalog_entry(self, key: str) -> dict[str, Any] | None:
        """The entry with id ``key``, or the one whose distribution name is ``key``."""
        rows = self.query("SELECT * FROM catalog WHERE id = ? OR name = ? ORDER BY id LIMIT 1", (key, key))
        return _catalog_row(rows[0]) if rows else None

    # -- skills ----------------------------------------------------------------------------

    def skill_states(self, *, owner: str) -> dict[str, dict[str, Any]]:
        """``{skill id: state}`` of ``owner``'s recorded choices (another principal's are never seen)."""
        rows = self.query("SELECT * FROM skill_state WHERE owner = ?", (owner,))
        return {r["id"]: {k: r[k] for k in r.keys() if k != "owner"} for r in rows}

    def update_skill(self, skill_id: str, *, owner: str, **fields: Any) -> None:
        """Set ``owner``'s state columns of ``skill_id`` (``uses=+1`` style increments via ``bump``)."""
        allowed = {"enabled", "scope", "pinned", "archived"}
        unknown = set(fields) - allowed
        if unknown:
            raise ValueError(f"unknown skill state fields: {sorted(unknown)}")
        with self.transaction() as db:
            db.execute("INSERT OR IGNORE INTO skill_state (owner, id) VALUES (?, ?)", (owner, skill_id))
            for key, value in fields.items():
                db.execute(f"UPDATE skill_state SET {key} = ? WHERE owner = ? AND id = ?", (value, owner, skill_id))

    def bump(self, skill_id: str, counter: str, *, owner: str) -> None:
        """Add one to ``owner``'s ``uses`` or ``views`` counter of ``skill_id``."""
        if counter not in ("uses", "views"):
            raise ValueError(counter)
        with self.transaction() as db:
            db.execute("INSERT OR IGNORE INTO skill_state (owner, id) VALUES (?, ?)", (owner, skill_id))
            db.execute(
                f"UPDATE skill_state SET {counter} = {counter} + 1 WHERE owner = ? AND id = ?", (owner, skill_id)
            )

    def pinned(self, skill_id: str) -> bool:
        """Whether any principal pinned ``skill_id`` (the skill's files are shared: one pin protects them)."""
        return bool(self.query("SELECT 1 FROM skill_state WHERE id = ? AND pinned = 1 LIMIT 1", (skill_id,)))

    def forget_skill(self, skill_id: str) -> None:
        """Drop every principal's state of ``skill_id`` (its files are gone)."""
        with self.transaction() as db:
            db.execute("DELETE FROM skill_state WHERE id = ?", (skill_id,))

    def skill_pin(self, location: str) -> dict[str, Any] | None:
        """The approved digest of the skill folder ``location`` and its seal, or None."""
        rows = self.query("SELECT * FROM skill_pins WHERE location = ?", (location,))
        return dict(rows[0]) if rows else None

    def put_skill_pin(self, location: str, digest: str, seal: str) -> None:
        """Record that a human approved the skill folder ``location`` as it hashes to ``digest``."""
        with self.transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO skill_pins (location, digest, seal, approved_at) VALUES (?,?,?,?)",
                (location, digest, seal, time.time()),
            )

    # -- receipts --------------------------------------------------------------------------

    def put_receipt(self, receipt: dict[str, Any]) -> None:
        """Record (or replace) the receipt of one installed distribution."""
        with self.transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO receipts (distribution, version, target, location, index_url, artifact,"
                " files, attestation, requirement, installed_at, seal) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (
                    receipt["distribution"],
                    receipt["version"],
                    receipt["target"],
                    receipt["location"],
                    receipt["index_url"],
                    json.dumps(receipt["artifact"], sort_keys=True),
                    json.dumps(receipt["files"], sort_keys=True),
                    json.dumps(receipt.get("attestation", {}), sort_keys=True),
                    receipt.get("requirement", ""),
                    receipt.get("installed_at", time.time()),
                    receipt.get("seal", ""),
                ),
            )

    def receipts(self) -> list[dict[str, Any]]:
        """Every receipt, by distribution."""
        out = []
        for r in self.query("SELECT * FROM receipts ORDER BY distribution"):
            item = dict(r)
            for key in ("artifact", "files", "attestation"):
                item[key] = json.loads(item[key])
            out.append(item)
        return out

    def receipt(self, distribution: str) -> dict[str, Any] | None:
        """The receipt of ``distribution`` (canonical name), or None."""
        return next((r for r in self.receipts() if r["distribution"] == distribution), None)

    def drop_receipt(self, distribution: str) -> None:
        """Forget the receipt of ``distribution``."""
        with self.transaction() as db:
            db.execute("DELETE FROM receipts WHERE distribution = ?", (distribution,))


def receipt_message(receipt: dict[str, Any]) -> bytes:
    """What a receipt's seal covers: the distribution, where it lives and every file's digest."""
    body = {k: receipt[k] for k in ("distribution", "version", "target", "location", "files")}
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode("utf-8")


def _catalog_row(row: sqlite3.Row) -> dict[str, Any]:
    item = dict(row)
    item["entry_points"] = json.loads(item["entry_points"])
    item["project_urls"] = json.loads(item["project_urls"])
    return item
