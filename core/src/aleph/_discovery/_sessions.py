"""Per-session knobs (mode, stored exec tier) in embedded SQLite under the runtime's data directory."""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, replace
from pathlib import Path

from aleph._chokepoint._tiers import ExecTier
from aleph._discovery._disclosure import MODES, SessionMode

__all__ = ["MAX_SESSION_KEY", "SessionKnobs", "SessionStore"]

MAX_SESSION_KEY = 512
_CACHE_SIZE = 4096

_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    session_key TEXT PRIMARY KEY,
    mode TEXT NOT NULL DEFAULT 'work',
    exec_tier TEXT,
    updated_ms INTEGER NOT NULL
)
"""


@dataclass(frozen=True, slots=True)
class SessionKnobs:
    """What a session stores about itself."""

    mode: SessionMode = "work"
    """``chat``, ``work`` (default) or ``code``: decides the core set and the deferred families."""
    exec_tier: str | None = None
    """A session override of the execution tier (``plan``/``ask``/``auto``/``full``), or None."""


_DEFAULT = SessionKnobs()
_MODES: dict[str, SessionMode] = {mode: mode for mode in MODES}


def _check_key(session_key: str) -> str:
    if not isinstance(session_key, str) or not session_key:
        raise ValueError("a session key is required (the turn context has none)")
    if len(session_key) > MAX_SESSION_KEY:
        raise ValueError(f"session key is {len(session_key)} characters long; the limit is {MAX_SESSION_KEY}")
    return session_key


class SessionStore:
    """Session knobs keyed by ``TurnContext.session_key``, in ``<data_dir>/sessions.sqlite3``.

    Reads are served from a bounded in-memory cache after the first one; writes go straight to
    SQLite. The file is created on the first write, so read-only use leaves no trace.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        """The database file."""
        self._lock = threading.Lock()
        self._cache: OrderedDict[str, SessionKnobs] = OrderedDict()

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, timeout=5.0)
        conn.execute(_SCHEMA)
        return conn

    def get(self, session_key: str) -> SessionKnobs:
        """The knobs of ``session_key`` (defaults for an unknown session or a key too long to store)."""
        if not session_key or len(session_key) > MAX_SESSION_KEY:
            return _DEFAULT
        with self._lock:
            hit = self._cache.get(session_key)
            if hit is not None:
                self._cache.move_to_end(session_key)
                return hit
        knobs = self._read(session_key)
        with self._lock:
            self._remember(session_key, knobs)
        return knobs

    def _read(self, session_key: str) -> SessionKnobs:
        if not self.path.exists():
            return _DEFAULT
        with contextlib.closing(sqlite3.connect(self.path, timeout=5.0)) as conn:
            try:
                row = conn.execute(
                    "SELECT mode, exec_tier FROM sessions WHERE session_key = ?", (session_key,)
                ).fetchone()
            except sqlite3.OperationalError:  # an empty file: no table yet
                return _DEFAULT
        if row is None:
            return _DEFAULT
        return SessionKnobs(_MODES.get(row[0], "work"), row[1])

    def _remember(self, session_key: str, knobs: SessionKnobs) -> None:
        self._cache[session_key] = knobs
        self._cache.move_to_end(session_key)
        while len(self._cache) > _CACHE_SIZE:
            self._cache.popitem(last=False)

    def _write(self, session_key: str, knobs: SessionKnobs) -> None:
        with contextlib.closing(self._connect()) as conn, conn:
            conn.execute(
                "INSERT INTO sessions (session_key, mode, exec_tier, updated_ms) VALUES (?, ?, ?, ?) "
                "ON CONFLICT(session_key) DO UPDATE SET mode = excluded.mode, exec_tier = excluded.exec_tier, "
                "updated_ms = excluded.updated_ms",
                (session_key, knobs.mode, knobs.exec_tier, int(time.time() * 1000)),
            )
        with self._lock:
            self._remember(session_key, knobs)

    def set_mode(self, session_key: str, mode: str) -> SessionKnobs:
        """Store ``mode`` for the session; an unknown mode raises ValueError naming the choices."""
        chosen = _MODES.get(mode)
        if chosen is None:
            raise ValueError(f"unknown session mode {mode!r}; choose one of: {', '.join(MODES)}")
        key = _check_key(session_key)
        knobs = replace(self.get(key), mode=chosen)
        self._write(key, knobs)
        return knobs

    def set_exec_tier(self, session_key: str, tier: str | ExecTier | None) -> SessionKnobs:
        """Store (or clear, with None) the session's execution tier; the host program decides, never a tool."""
        key = _check_key(session_key)
        value = None if tier is None else ExecTier.parse(tier).id
        knobs = replace(self.get(key), exec_tier=value)
        self._write(key, knobs)
        return knobs
