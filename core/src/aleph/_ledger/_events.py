"""The session event log: what happened to each tool call of a session, in embedded SQLite (WAL).

The chokepoint records ``approved``, ``denied``, ``executed``, ``refused`` and ``failed`` events
with :meth:`EventLog.record`, which only queues them: a background thread writes batches with one
transaction each. Writing is best-effort by design — a full queue, a read-only or broken database
is logged and counted in :attr:`EventLog.lost`, and never reaches the caller or changes a decision.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import sqlite3
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal, get_args

__all__ = ["EventKind", "EventLog", "SessionEvent"]

logger = logging.getLogger("aleph.events")

EventKind = Literal["approved", "denied", "executed", "refused", "failed"]
"""What happened to a call: a human or grant approved it, a human denied it, it ran, a gate refused it, it failed."""
_KINDS: frozenset[str] = frozenset(get_args(EventKind))

QUEUE_SIZE = 4096
MAX_TEXT = 4096
_TRUNCATED = "… [truncated]"
MAX_LIMIT = 10_000

_SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_key TEXT NOT NULL,
    kind TEXT NOT NULL,
    tool TEXT NOT NULL,
    call_id TEXT,
    turn_id TEXT,
    detail TEXT NOT NULL,
    by TEXT,
    at_ms INTEGER NOT NULL,
    principal TEXT
);
CREATE INDEX IF NOT EXISTS events_by_session ON events (session_key, id);
"""


@dataclass(frozen=True, slots=True)
class SessionEvent:
    """One recorded event. ``by`` says who decided an approval (``"user"``, ``"trusted"``, ...)."""

    session_key: str
    kind: str
    tool: str
    call_id: str | None
    turn_id: str | None
    detail: str
    by: str | None
    at_ms: int
    principal: str | None = None
    """Who made the call: the principal and its chain as JSON (see :class:`aleph.Principal`)."""

    def to_json(self) -> dict[str, Any]:
        """The event as a JSON object."""
        return asdict(self)


_Row = tuple[str, str, str, str | None, str | None, str, str | None, int, str | None]


class _Flush:
    __slots__ = ("event",)

    def __init__(self) -> None:
        self.event = threading.Event()


def _clip(value: str | None) -> str | None:
    if value is None:
        return None
    text = value if isinstance(value, str) else str(value)
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - len(_TRUNCATED)] + _TRUNCATED


class EventLog:
    """Session events in SQLite at ``path`` (created on first write, WAL mode).

    :meth:`record` never raises for storage problems and never blocks; :meth:`events` reads back
    (after waiting briefly for queued writes); :meth:`close` drains and stops the writer.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.lost = 0
        self._queue: queue.Queue[_Row | _Flush | None] = queue.Queue(QUEUE_SIZE)
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = False

    def record(
        self,
        session_key: str,
        kind: EventKind,
        tool: str,
        *,
        call_id: str | None = None,
        turn_id: str | None = None,
        detail: str = "",
        by: str | None = None,
        principal: str | None = None,
    ) -> None:
        """Queue one event. Raises ``ValueError`` only for an unknown ``kind`` (a programming error)."""
        if kind not in _KINDS:
            raise ValueError(f"unknown event kind {kind!r}; expected one of {sorted(_KINDS)}")
        row: _Row = (
            str(session_key),
            kind,
            str(tool),
            _clip(call_id),
            _clip(turn_id),
            _clip(detail) or "",
            _clip(by),
            time.time_ns() // 1_000_000,
            _clip(principal),
        )
        if not self._ensure_started():
            self._lose(1, "the event log is closed")
            return
        try:
            self._queue.put_nowait(row)
        except queue.Full:
            self._lose(1, "the write queue is full")

    def _lose(self, count: int, why: str) -> None:
        with self._lock:
            self.lost += count
        logger.warning("event log %s: %d event(s) not stored: %s", self.path, count, why)

    def _ensure_started(self) -> bool:
        if self._thread is not None and not self._closed:
            return True
        with self._lock:
            if self._closed:
                return False
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="aleph-event-log", daemon=True)
                self._thread.start()
            return True

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA busy_timeout=2000")
            conn.executescript(_SCHEMA)
            columns = {row[1] for row in conn.execute("PRAGMA table_info(events)")}
            if "principal" not in columns:  # a log written before events carried their principal
                conn.execute("ALTER TABLE events ADD COLUMN principal TEXT")
        except BaseException:
            conn.close()
            raise
        return conn

    def _run(self) -> None:
        conn: sqlite3.Connection | None = None
        while True:
            batch = [self._queue.get()]
            while len(batch) < 1024:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            rows = [item for item in batch if isinstance(item, tuple)]
            if rows:
                try:
                    if conn is None:
                        conn = self._connect()
                    with conn:
                        conn.execute("BEGIN")
                        conn.executemany(
                            "INSERT INTO events"
                            " (session_key, kind, tool, call_id, turn_id, detail, by, at_ms, principal)"
                            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                            rows,
                        )
                except (sqlite3.Error, OSError) as exc:
                    self._lose(len(rows), f"{type(exc).__name__}: {exc}")
                    if conn is not None:
                        with contextlib.suppress(sqlite3.Error):
                            conn.close()
                    conn = None  # reconnect next time: the path may have been fixed
            for item in batch:
                if isinstance(item, _Flush):
                    item.event.set()
            if any(item is None for item in batch):
                if conn is not None:
                    with contextlib.suppress(sqlite3.Error):
                        conn.close()
                return

    def flush(self, timeout: float | None = 10.0) -> bool:
        """Wait until events recorded before this call are written (or counted lost); False on timeout."""
        thread = self._thread
        if thread is None or not thread.is_alive():
            return True
        marker = _Flush()
        try:
            self._queue.put(marker, timeout=timeout)
        except queue.Full:
            return False
        return marker.event.wait(timeout)

    def events(self, session_key: str, limit: int = 100) -> list[SessionEvent]:
        """The session's newest ``limit`` events (1..10000), oldest first. An unreadable database gives ``[]``."""
        if not 1 <= limit <= MAX_LIMIT:
            raise ValueError(f"limit must be between 1 and {MAX_LIMIT}, got {limit}")
        self.flush()
        if not self.path.exists():
            return []
        try:
            conn = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True)
            try:
                cur = conn.execute(
                    "SELECT session_key, kind, tool, call_id, turn_id, detail, by, at_ms, principal FROM events"
                    " WHERE session_key = ? ORDER BY id DESC LIMIT ?",
                    (session_key, limit),
                )
                rows = cur.fetchall()
            finally:
                conn.close()
        except sqlite3.Error as exc:
            logger.warning("event log %s: cannot read: %s", self.path, exc)
            return []
        return [SessionEvent(*row) for row in reversed(rows)]

    def close(self) -> None:
        """Write what is queued and stop the writer thread."""
        with self._lock:
            already, self._closed = self._closed, True
            thread = self._thread
        if thread is None:
            return
        if not already:
            self._queue.put(None)
        thread.join()
