"""The durable approval inbox: asks any process offers in the data directory, answered by any console.

``<data_dir>/console/`` (mode 0700) holds ``inbox.sqlite3`` (SQLite in WAL mode, mode 0600, as are its
``-wal`` and ``-shm`` files, which SQLite creates with the database's mode). A runtime or ``aleph serve``
that needs a human writes one row per ask: the request as the human sees it (already redacted), who asked,
which process, when it expires. ``aleph console``, started separately on the same data directory, lists
the pending rows and writes the answer into the row; the first answer wins (an ``UPDATE`` that only
changes a row still pending), so two consoles, or a console and the terminal, never both decide.

The waiting process notices the answer by polling ``PRAGMA data_version`` every :data:`POLL_S` seconds
(one cheap read; it changes only when another connection committed) and then reads its rows. Nobody but
the data directory's owner can open the file, so nobody else can read an ask or write an answer; the
console's page adds its own token on top.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import logging
import os
import secrets
import socket
import sqlite3
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aleph._chokepoint._approval import ApprovalDecision, ApprovalOutcome, ApprovalResponse

__all__ = [
    "ANSWERS",
    "MAX_PENDING",
    "POLL_S",
    "AskStore",
    "InboxClosed",
    "StoredAsk",
    "console_running",
    "hold_console_lock",
    "inbox_directory",
]

log = logging.getLogger("aleph.console")

POLL_S = 0.02
"""How often a waiting process looks for an answer (a ``PRAGMA data_version`` read)."""
MAX_PENDING = 1000
"""Asks waiting at once across all processes; beyond it a new ask is not offered (nobody reads a longer inbox)."""
MAX_REQUEST_CHARS = 64 * 1024
"""Largest stored request (its arguments are clipped to fit)."""
KEEP_DONE_S = 24 * 3600.0
"""Answered, withdrawn and expired rows are kept this long, then removed."""
SCHEMA = 1

ANSWERS: dict[ApprovalDecision, ApprovalOutcome] = {
    ApprovalDecision.ALLOW_ONCE: ApprovalOutcome.APPROVED,
    ApprovalDecision.ALLOW_SESSION: ApprovalOutcome.APPROVED_FOR_SESSION,
    ApprovalDecision.ALLOW_ALWAYS: ApprovalOutcome.APPROVED_ALWAYS,
    ApprovalDecision.DENY: ApprovalOutcome.DENIED,
}
"""What each answer a console offers means to the waiting call."""


class InboxClosed(RuntimeError):
    """The inbox was closed (the runtime ended) while an ask waited in it."""


_DDL = """
CREATE TABLE IF NOT EXISTS asks (
    id TEXT PRIMARY KEY,
    asked_at REAL NOT NULL,
    expires_at REAL NOT NULL,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    process TEXT NOT NULL,
    tool TEXT NOT NULL,
    request TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'pending',
    decision TEXT,
    reason TEXT,
    answered_at REAL,
    answered_by TEXT
);
CREATE INDEX IF NOT EXISTS asks_state ON asks (state, asked_at);
"""


def inbox_directory(data_dir: Path) -> Path:
    """Where the inbox and the console's presence lock live: ``<data_dir>/console``."""
    return data_dir / "console"


def _private_dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    info = path.stat()
    if info.st_uid == os.getuid() and info.st_mode & 0o077:
        os.chmod(path, 0o700)  # made by an older version or another umask: nobody else may list it
    return path


@dataclass(frozen=True, slots=True)
class StoredAsk:
    """One ask as the inbox holds it (``request`` is what a human is shown: tool, summary, arguments...)."""

    id: str
    asked_at: float
    expires_at: float
    host: str
    pid: int
    process: str
    tool: str
    request: dict[str, Any] = field(repr=False)
    state: str = "pending"
    decision: str | None = None
    reason: str | None = None
    answered_by: str | None = None

    @property
    def allowed(self) -> tuple[str, ...]:
        """The answers this ask offers (``allow_once``, ``allow_session``, ``allow_always``, ``deny``)."""
        return tuple(str(d) for d in self.request.get("allowed", ()))

    def response(self) -> ApprovalResponse | None:
        """The waiting call's answer once this row is settled (None while it is pending)."""
        if self.state == "answered" and self.decision is not None:
            outcome = ANSWERS[ApprovalDecision(self.decision)]
            return ApprovalResponse(outcome, self.reason if outcome is ApprovalOutcome.DENIED else None)
        if self.state == "expired":
            return ApprovalResponse(ApprovalOutcome.TIMEOUT, "nobody answered in the console's inbox in time")
        if self.state == "withdrawn":
            return ApprovalResponse(ApprovalOutcome.UNAVAILABLE, "the ask was withdrawn")
        return None


_COLUMNS = "id, asked_at, expires_at, host, pid, process, tool, request, state, decision, reason, answered_by"


def _row(values: tuple[Any, ...]) -> StoredAsk:
    try:
        request = json.loads(values[7])
    except ValueError:
        request = {}
    ask_id, asked_at, expires_at, host, pid, process, tool, _, state, decision, reason, by = values
    request = request if isinstance(request, dict) else {}
    return StoredAsk(ask_id, asked_at, expires_at, host, pid, process, tool, request, state, decision, reason, by)


def _clip_request(request: dict[str, Any]) -> str:
    text = json.dumps(request, ensure_ascii=False, default=str)
    if len(text) > MAX_REQUEST_CHARS:
        arguments = json.dumps(request.get("arguments"), ensure_ascii=False, default=str)
        request = {**request, "arguments": {"(clipped)": arguments[: MAX_REQUEST_CHARS // 2] + "…"}}
        text = json.dumps(request, ensure_ascii=False, default=str)[:MAX_REQUEST_CHARS]
    return text


def _alive(host: str, pid: int) -> bool:
    """Whether the process that asked still runs (unknown, so alive, for another host's)."""
    if host != socket.gethostname():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class AskStore:
    """The inbox file of one data directory: offer an ask, wait for its answer, answer, list, withdraw."""

    def __init__(self, directory: Path) -> None:
        """Open (creating, private to this user) ``directory/inbox.sqlite3``."""
        self.directory = _private_dir(directory)
        self.path = self.directory / "inbox.sqlite3"
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        os.close(fd)
        if self.path.stat().st_mode & 0o077:
            os.chmod(self.path, 0o600)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=5.0)
        with self._locked() as db:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA:
                raise RuntimeError(f"{self.path} was written by a newer Aleph (schema {version}); upgrade aleph-core")
            db.executescript(_DDL)
            db.execute(f"PRAGMA user_version={SCHEMA}")
            db.execute("DELETE FROM asks WHERE state != 'pending' AND asked_at < ?", (time.time() - KEEP_DONE_S,))
        self._waits: dict[str, asyncio.Future[StoredAsk]] = {}
        self._poller: asyncio.Task[None] | None = None
        self._version: int | None = None

    @contextlib.contextmanager
    def _locked(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            yield self._db

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction that takes the file's write lock at once (so a read-then-write cannot race)."""
        with self._locked() as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    def close(self) -> None:
        """Close the file; a wait still open ends with :class:`InboxClosed` (its ask stays for its expiry)."""
        if self._poller is not None:
            self._poller.cancel()
        for future in self._waits.values():
            if not future.done():
                future.set_exception(InboxClosed("the console inbox was closed while the ask waited"))
        with self._locked() as db:
            db.close()

    # -- the asking side -------------------------------------------------------------------------

    def offer(self, request: dict[str, Any], *, tool: str, expires_at: float, process: str) -> str | None:
        """Store a pending ask; returns its id, or None when the inbox already holds :data:`MAX_PENDING`."""
        ask_id = secrets.token_urlsafe(12)
        now = time.time()
        text = _clip_request(request)
        with self._transaction() as db:
            waiting = db.execute(
                "SELECT count(*) FROM asks WHERE state = 'pending' AND expires_at > ?", (now,)
            ).fetchone()[0]
            if waiting >= MAX_PENDING:
                return None
            db.execute(
                "INSERT INTO asks (id, asked_at, expires_at, host, pid, process, tool, request)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (ask_id, now, expires_at, socket.gethostname(), os.getpid(), process[:200], tool[:256], text),
            )
        return ask_id

    def withdraw(self, ask_id: str) -> StoredAsk | None:
        """Take back an ask nobody answered (another requester did, or the call ended); returns the row.

        A row already answered stays answered: the returned row says so.
        """
        with self._locked() as db:
            db.execute("UPDATE asks SET state = 'withdrawn' WHERE id = ? AND state = 'pending'", (ask_id,))
            found = db.execute(f"SELECT {_COLUMNS} FROM asks WHERE id = ?", (ask_id,)).fetchone()
        return _row(found) if found else None

    async def wait(self, ask_id: str) -> StoredAsk:
        """Wait until the row ``ask_id`` is answered, withdrawn or past its expiry (then marked expired)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[StoredAsk] = loop.create_future()
        self._waits[ask_id] = future
        self._version = None  # read the rows on the next look even if nothing was written since the last
        poller = self._poller
        if poller is None or poller.done() or poller.get_loop() is not loop:
            self._poller = loop.create_task(self._poll(), name="aleph-inbox-poll")
        try:
            return await future
        finally:
            self._waits.pop(ask_id, None)

    async def _poll(self) -> None:
        """Settle the waits of this process whenever the file changed (or an ask expired), while any wait."""
        try:
            while self._waits:
                self._settle()
                await asyncio.sleep(POLL_S)
        except Exception:
            log.exception("the console inbox could not be read")
            for future in self._waits.values():
                if not future.done():
                    future.set_exception(RuntimeError("the console inbox could not be read"))

    def _settle(self) -> None:
        now = time.time()
        with self._locked() as db:
            version = db.execute("PRAGMA data_version").fetchone()[0]
            ids = list(self._waits)
            marks = ",".join("?" * len(ids))
            expired = db.execute(
                f"SELECT id FROM asks WHERE id IN ({marks}) AND state = 'pending' AND expires_at <= ?", (*ids, now)
            ).fetchall()
            if expired:
                db.executemany(
                    "UPDATE asks SET state = 'expired' WHERE id = ? AND state = 'pending'", [(i,) for (i,) in expired]
                )
            elif version == self._version:
                return  # nobody wrote since the last look
            self._version = version
            rows = db.execute(
                f"SELECT {_COLUMNS} FROM asks WHERE id IN ({marks}) AND state != 'pending'", ids
            ).fetchall()
        for values in rows:
            row = _row(values)
            future = self._waits.get(row.id)
            if future is not None and not future.done():
                future.set_result(row)

    # -- the console's side ----------------------------------------------------------------------

    def pending(self, limit: int = MAX_PENDING) -> list[StoredAsk]:
        """The asks waiting now, oldest first; an ask whose process is gone is marked withdrawn instead."""
        now = time.time()
        with self._locked() as db:
            rows = [
                _row(v)
                for v in db.execute(
                    f"SELECT {_COLUMNS} FROM asks WHERE state = 'pending' AND expires_at > ? ORDER BY asked_at LIMIT ?",
                    (now, limit),
                ).fetchall()
            ]
            gone = [r.id for r in rows if not _alive(r.host, r.pid)]
            if gone:
                db.executemany(
                    "UPDATE asks SET state = 'withdrawn', answered_by = 'its process ended' WHERE id = ? "
                    "AND state = 'pending'",
                    [(i,) for i in gone],
                )
        return [r for r in rows if r.id not in gone]

    def get(self, ask_id: str) -> StoredAsk | None:
        """The row ``ask_id``, whatever its state."""
        with self._locked() as db:
            found = db.execute(f"SELECT {_COLUMNS} FROM asks WHERE id = ?", (ask_id,)).fetchone()
        return _row(found) if found else None

    def answer(self, ask_id: str, decision: str, reason: str | None = None, *, by: str = "console") -> str | None:
        """Answer the pending ask ``ask_id``; returns why not when it cannot be (first answer wins)."""
        try:
            choice = ApprovalDecision(decision)
        except ValueError:
            return f"unknown answer {decision!r}"
        why = (reason or "").strip()[:500] or None if choice is ApprovalDecision.DENY else None
        with self._transaction() as db:
            found = db.execute(f"SELECT {_COLUMNS} FROM asks WHERE id = ?", (ask_id,)).fetchone()
            row = _row(found) if found else None
            if row is None or row.state != "pending" or row.expires_at <= time.time():
                return "that ask is no longer waiting (answered elsewhere, timed out, or never asked)"
            if choice.value not in row.allowed:
                return f"{choice.value} is not offered for this ask"
            db.execute(
                "UPDATE asks SET state = 'answered', decision = ?, reason = ?, answered_at = ?, answered_by = ? "
                "WHERE id = ? AND state = 'pending'",
                (choice.value, why, time.time(), by[:200], ask_id),
            )
        return None

    def version(self) -> int:
        """A number that changes whenever another connection wrote (the console's page waits on it)."""
        with self._locked() as db:
            return int(db.execute("PRAGMA data_version").fetchone()[0])


# -- whether a console is running on this data directory -------------------------------------------


def hold_console_lock(directory: Path) -> int:
    """Take the console's presence lock (shared: several consoles may run); returns the fd to keep open."""
    fd = os.open(_private_dir(directory) / "console.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    fcntl.flock(fd, fcntl.LOCK_SH)
    return fd


def console_running(directory: Path) -> bool:
    """Whether some process holds the console's presence lock on ``directory`` (a console is up)."""
    try:
        fd = os.open(directory / "console.lock", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)  # closing drops the probe's own lock
    return False
