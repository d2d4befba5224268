"""Pairings: which senders of which channel may reach which agent.

An unknown sender gets a one-time code; the owner (an operator, on a trusted channel) approves or refuses
it with ``channel_pairing``. An approved pairing belongs to the agent that approved it, lapses after
``pairing_ttl_days`` and can be revoked. Every read and write of pairings goes through
:class:`PairingStore` with the owner's name, so one agent never sees another's pairings: a foreign
pairing answers exactly like a missing one.

Codes are stored as SHA-256 digests: reading the database does not give anyone a code to approve.
"""

from __future__ import annotations

import hashlib
import secrets
import sqlite3
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CODE_ALPHABET", "Pairing", "PairingStore", "PendingCode", "normalise_code"]

CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
"""32 symbols without look-alikes (no 0/O, 1/I): 8 of them carry 40 bits."""
_SCHEMA = 1


def normalise_code(code: str) -> str:
    """``abcd-efgh`` and ``ABCDEFGH`` are the same code."""
    return "".join(ch for ch in code.upper() if ch.isalnum())


def _digest(code: str) -> str:
    return hashlib.sha256(normalise_code(code).encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class PendingCode:
    """A code handed to an unknown sender, waiting for the owner."""

    code: str
    """The code itself: only known at creation (the store keeps its digest)."""
    adapter: str
    sender: str
    expires_at: float
    fresh: bool
    """False when the sender already had a live code (it is not sent again)."""


@dataclass(frozen=True, slots=True)
class Pairing:
    """An approved sender, owned by an agent."""

    id: str
    owner: str
    adapter: str
    sender: str
    approved_by: str
    created_at: float
    expires_at: float
    revoked_at: float | None

    def active(self, now: float) -> bool:
        """Approved, not revoked and not lapsed."""
        return self.revoked_at is None and self.expires_at > now

    def as_dict(self, now: float) -> dict[str, object]:
        """The pairing as a tool shows it."""
        return {
            "id": self.id,
            "channel": self.adapter,
            "sender": self.sender,
            "approved_by": self.approved_by,
            "created_at": self.created_at,
            "expires_at": self.expires_at,
            "status": "revoked" if self.revoked_at is not None else ("active" if self.expires_at > now else "expired"),
        }


class PairingStore:
    """One SQLite file (WAL) of pending codes and pairings; every pairing query is scoped to its owner."""

    def __init__(self, path: Path, *, code_ttl_s: int, pairing_ttl_s: int, max_pending: int) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=30)
        self._lock = threading.Lock()
        self.code_ttl_s = code_ttl_s
        self.pairing_ttl_s = pairing_ttl_s
        self.max_pending = max_pending
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA busy_timeout=30000")
            self._db.executescript(
                """
                CREATE TABLE IF NOT EXISTS pending (
                    digest TEXT PRIMARY KEY, adapter TEXT NOT NULL, sender TEXT NOT NULL,
                    created_at REAL NOT NULL, expires_at REAL NOT NULL);
                CREATE INDEX IF NOT EXISTS pending_sender ON pending(adapter, sender);
                CREATE TABLE IF NOT EXISTS pairings (
                    id TEXT PRIMARY KEY, owner TEXT NOT NULL, adapter TEXT NOT NULL, sender TEXT NOT NULL,
                    approved_by TEXT NOT NULL, created_at REAL NOT NULL, expires_at REAL NOT NULL,
                    revoked_at REAL);
                CREATE INDEX IF NOT EXISTS pairings_sender ON pairings(adapter, sender);
                CREATE INDEX IF NOT EXISTS pairings_owner ON pairings(owner);
                """
            )
            self._db.execute(f"PRAGMA user_version={_SCHEMA}")

    def close(self) -> None:
        """Close the database."""
        with self._lock:
            self._db.close()

    # --- senders (adapter side: no owner, it only asks "may this sender reach an agent?") ---

    def owner_of(self, adapter: str, sender: str, now: float | None = None) -> str | None:
        """The agent an active pairing of ``sender`` on ``adapter`` belongs to, or None."""
        now = time.time() if now is None else now
        with self._lock:
            row = self._db.execute(
                "SELECT owner FROM pairings WHERE adapter=? AND sender=? AND revoked_at IS NULL AND expires_at>?"
                " ORDER BY created_at DESC LIMIT 1",
                (adapter, sender, now),
            ).fetchone()
        return row[0] if row else None

    def issue_code(self, adapter: str, sender: str, now: float | None = None) -> PendingCode:
        """A code for an unknown sender: its live one if it has one (not fresh), else a new one."""
        now = time.time() if now is None else now
        with self._lock:
            self._db.execute("DELETE FROM pending WHERE expires_at<=?", (now,))
            live = self._db.execute(
                "SELECT expires_at FROM pending WHERE adapter=? AND sender=? AND expires_at>?", (adapter, sender, now)
            ).fetchone()
            if live:
                return PendingCode("", adapter, sender, live[0], fresh=False)
            code = "".join(secrets.choice(CODE_ALPHABET) for _ in range(8))
            expires = now + self.code_ttl_s
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.execute(
                    "INSERT INTO pending VALUES (?,?,?,?,?)", (_digest(code), adapter, sender, now, expires)
                )
                self._db.execute(
                    "DELETE FROM pending WHERE digest IN (SELECT digest FROM pending ORDER BY created_at DESC"
                    " LIMIT -1 OFFSET ?)",
                    (self.max_pending,),
                )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return PendingCode(f"{code[:4]}-{code[4:]}", adapter, sender, expires, fresh=True)

    # --- owners (tool side: every call names the owner) ---

    def approve(self, owner: str, code: str, approved_by: str, now: float | None = None) -> Pairing | None:
        """Turn a live code into a pairing owned by ``owner``; None when no live code matches."""
        now = time.time() if now is None else now
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                row = self._db.execute(
                    "SELECT adapter, sender FROM pending WHERE digest=? AND expires_at>?", (_digest(code), now)
                ).fetchone()
                if row is None:
                    self._db.execute("ROLLBACK")
                    return None
                adapter, sender = row
                self._db.execute("DELETE FROM pending WHERE digest=?", (_digest(code),))
                # A sender is paired with one agent at a time: a new approval replaces its older pairings.
                self._db.execute(
                    "UPDATE pairings SET revoked_at=? WHERE adapter=? AND sender=? AND revoked_at IS NULL",
                    (now, adapter, sender),
                )
                pairing = Pairing(
                    uuid.uuid4().hex[:12], owner, adapter, sender, approved_by, now, now + self.pairing_ttl_s, None
                )
                self._db.execute(
                    "INSERT INTO pairings VALUES (?,?,?,?,?,?,?,?)",
                    (pairing.id, owner, adapter, sender, approved_by, now, pairing.expires_at, None),
                )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return pairing

    def peek(self, code: str, now: float | None = None) -> tuple[str, str] | None:
        """The (adapter, sender) a live code was issued to, or None; the code stays pending."""
        now = time.time() if now is None else now
        with self._lock:
            row = self._db.execute(
                "SELECT adapter, sender FROM pending WHERE digest=? AND expires_at>?", (_digest(code), now)
            ).fetchone()
        return (row[0], row[1]) if row else None

    def refuse(self, code: str, now: float | None = None) -> tuple[str, str] | None:
        """Drop a live code; returns (adapter, sender) it was for, or None."""
        now = time.time() if now is None else now
        with self._lock:
            row = self._db.execute(
                "DELETE FROM pending WHERE digest=? AND expires_at>? RETURNING adapter, sender", (_digest(code), now)
            ).fetchone()
        return (row[0], row[1]) if row else None

    def get(self, owner: str, pairing_id: str) -> Pairing | None:
        """The owner's pairing ``pairing_id``; a foreign one is None, like a missing one."""
        with self._lock:
            row = self._db.execute("SELECT * FROM pairings WHERE id=? AND owner=?", (pairing_id, owner)).fetchone()
        return Pairing(*row) if row else None

    def list(self, owner: str, *, include_inactive: bool = False, limit: int = 100) -> list[Pairing]:
        """The owner's pairings, newest first."""
        now = time.time()
        sql = "SELECT * FROM pairings WHERE owner=?"
        params: tuple[object, ...] = (owner,)
        if not include_inactive:
            sql += " AND revoked_at IS NULL AND expires_at>?"
            params += (now,)
        with self._lock:
            rows = self._db.execute(sql + " ORDER BY created_at DESC LIMIT ?", (*params, limit)).fetchall()
        return [Pairing(*row) for row in rows]

    def revoke(self, owner: str, pairing_id: str, now: float | None = None) -> Pairing | None:
        """Revoke the owner's active pairing; None when it is not the owner's or not active."""
        now = time.time() if now is None else now
        with self._lock:
            row = self._db.execute(
                "UPDATE pairings SET revoked_at=? WHERE id=? AND owner=? AND revoked_at IS NULL RETURNING *",
                (now, pairing_id, owner),
            ).fetchone()
        return Pairing(*row) if row else None

    def pending_count(self) -> int:
        """Live codes waiting for an owner."""
        with self._lock:
            return int(
                self._db.execute("SELECT count(*) FROM pending WHERE expires_at>?", (time.time(),)).fetchone()[0]
            )
