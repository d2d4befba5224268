"""Sessions: metadata, transcripts and message queues beside core's session event log.

Core's :class:`aleph.EventLog` records what happened to each tool call of a session; this store adds
what a memory family needs around it: a topic, epochs (``session_new`` closes ``key`` and opens
``key:s1``, ``key:s2``...), the transcript a host appends (``append_message``), a queue of messages
other sessions sent (``session_send`` → ``take_queued``), compaction and completion.
"""

from __future__ import annotations

import builtins
import re
import uuid
from collections import Counter
from dataclasses import dataclass
from typing import Any

from aleph_memory._db import Database
from aleph_memory._items import iso, now_ms
from aleph_memory._text import fts_query, terms

__all__ = ["KEY", "ForeignSession", "SessionStore", "extract", "next_epoch"]

KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9:_.@/-]{0,199}")
MAX_MESSAGE = 100_000
_EPOCH = re.compile(r"^(.*):s(\d{1,6})$")


def next_epoch(key: str) -> str:
    """The key of the session that follows ``key`` (``agent:main:default`` → ``agent:main:default:s1``)."""
    match = _EPOCH.match(key)
    if match:
        return f"{match.group(1)}:s{int(match.group(2)) + 1}"
    return f"{key}:s1"


@dataclass(frozen=True, slots=True)
class Message:
    """One transcript message."""

    rowid: int
    session: str
    role: str
    content: str
    at: int
    compacted: bool


class ForeignSession(Exception):
    """The session key belongs to another agent: nothing was read or changed."""

    def __init__(self, key: str) -> None:
        super().__init__(f"session {key!r} belongs to another agent")
        self.key = key


def _own(conn: Any, key: str, agent: str, at: int) -> None:
    """Claim ``key`` for ``agent`` on first sight, else check it is ``agent``'s (raises :class:`ForeignSession`).

    Every write to a session passes here, in the writing transaction: a session is its first writer's,
    and no key given by a turn or a host lets one agent open, close, rename or fill another's session.
    """
    conn.execute(
        "INSERT INTO sessions (key, agent, created_at, last_active_at) VALUES (?, ?, ?, ?) ON CONFLICT(key) DO NOTHING",
        (key, agent, at, at),
    )
    owner = conn.execute("SELECT agent FROM sessions WHERE key = ?", (key,)).fetchone()[0]
    if owner != agent:
        raise ForeignSession(key)


class SessionStore:
    """Sessions, transcripts and queues in the family's database; each session is one agent's."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def touch(self, key: str, agent: str) -> None:
        """Note that ``agent``'s session ``key`` is active (claiming it on first sight)."""
        at = now_ms()
        with self.db.write() as conn:
            _own(conn, key, agent, at)
            conn.execute("UPDATE sessions SET last_active_at = ? WHERE key = ?", (at, key))

    def foreign(self, key: str, agent: str) -> bool:
        """Whether ``key`` is a session of another agent than ``agent``."""
        with self.db.read() as conn:
            row = conn.execute("SELECT agent FROM sessions WHERE key = ?", (key,)).fetchone()
        return row is not None and row[0] != agent

    def get(self, key: str, *, owner: str | None) -> dict[str, Any] | None:
        """One session's metadata: ``owner``'s, or None as for a missing one (``owner=None``: a host's view)."""
        with self.db.read() as conn:
            row = conn.execute(
                "SELECT key, agent, topic, created_at, last_active_at, closed_at, completed_at, parent, message_count,"
                " last_message_preview FROM sessions WHERE key = ? AND (? IS NULL OR agent = ?)",
                (key, owner, owner),
            ).fetchone()
        return _session(row) if row else None

    def list_sessions(
        self, *, agent: str | None, active_since: int | None, limit: int
    ) -> builtins.list[dict[str, Any]]:
        """Sessions, most recently active first."""
        sql = (
            "SELECT key, agent, topic, created_at, last_active_at, closed_at, completed_at, parent, message_count,"
            " last_message_preview FROM sessions WHERE 1 = 1"
        )
        params: list[Any] = []
        if agent is not None:
            sql += " AND agent = ?"
            params.append(agent)
        if active_since is not None:
            sql += " AND last_active_at >= ?"
            params.append(active_since)
        sql += " ORDER BY last_active_at DESC, key LIMIT ?"
        params.append(limit)
        with self.db.read() as conn:
            rows = conn.execute(sql, params).fetchall()
        out = [_session(r) for r in rows]
        with self.db.read() as conn:
            for s in out:
                s["queued"] = conn.execute(
                    "SELECT count(*) FROM queue WHERE target = ? AND taken_at IS NULL", (s["key"],)
                ).fetchone()[0]
        return out

    def append_message(self, key: str, role: str, content: str, *, agent: str = "default") -> int:
        """Add one message to ``key``'s transcript (hosts call this for each user/assistant turn)."""
        if KEY.fullmatch(key) is None:
            raise ValueError(f"invalid session key {key!r}")
        text = content if len(content) <= MAX_MESSAGE else content[:MAX_MESSAGE] + "… [truncated]"
        at = now_ms()
        with self.db.write() as conn:
            _own(conn, key, agent, at)
            conn.execute("UPDATE sessions SET last_active_at = ? WHERE key = ?", (at, key))
            cur = conn.execute(
                "INSERT INTO messages (session, role, content, at) VALUES (?, ?, ?, ?)", (key, role, text, at)
            )
            rowid = int(cur.lastrowid or 0)
            conn.execute("INSERT INTO messages_fts (rowid, content) VALUES (?, ?)", (rowid, text))
            conn.execute(
                "UPDATE sessions SET message_count = message_count + 1, last_message_preview = ? WHERE key = ?",
                (" ".join(text.split())[:160], key),
            )
        return rowid

    def messages(
        self, key: str, *, owner: str | None, include_compacted: bool = False, limit: int = 10_000
    ) -> list[Message]:
        """``owner``'s session ``key``'s transcript, oldest first ([] for another agent's; None: a host's view)."""
        sql = (
            "SELECT rowid, session, role, content, at, compacted FROM messages WHERE session = ?"
            " AND (? IS NULL OR EXISTS (SELECT 1 FROM sessions WHERE key = ? AND agent = ?))"
        )
        if not include_compacted:
            sql += " AND compacted = 0"
        with self.db.read() as conn:
            rows = conn.execute(sql + " ORDER BY rowid LIMIT ?", (key, owner, key, owner, limit)).fetchall()
        return [Message(r[0], r[1], r[2], r[3], r[4], bool(r[5])) for r in rows]

    def mark_compacted(self, rowids: list[int]) -> None:
        """Retire messages from replay (rows and their index stay searchable)."""
        with self.db.write() as conn:
            conn.executemany("UPDATE messages SET compacted = 1 WHERE rowid = ?", [(r,) for r in rowids])

    def new_epoch(self, key: str, agent: str, topic: str | None) -> str:
        """Close ``key`` (with ``topic``) and open the session after it; returns the new key."""
        new = next_epoch(key)
        at = now_ms()
        with self.db.write() as conn:
            _own(conn, key, agent, at)
            _own(conn, new, agent, at)  # the next epoch's key may not be someone else's either
            conn.execute(
                "UPDATE sessions SET closed_at = ?, topic = coalesce(?, topic) WHERE key = ?", (at, topic, key)
            )
            conn.execute(
                "UPDATE sessions SET closed_at = NULL, last_active_at = ?, parent = coalesce(parent, ?) WHERE key = ?",
                (at, key, new),
            )
        return new

    def rename(self, key: str, agent: str, topic: str) -> None:
        """Set ``key``'s topic."""
        at = now_ms()
        with self.db.write() as conn:
            _own(conn, key, agent, at)
            conn.execute("UPDATE sessions SET topic = ?, last_active_at = ? WHERE key = ?", (topic, at, key))

    def complete(self, key: str, agent: str) -> None:
        """Mark ``key``'s task complete (the conversation goes on)."""
        at = now_ms()
        with self.db.write() as conn:
            _own(conn, key, agent, at)
            conn.execute("UPDATE sessions SET completed_at = ? WHERE key = ?", (at, key))

    def send(self, target: str, content: str, *, sender_session: str | None, sender_agent: str) -> str:
        """Queue ``content`` for ``target``; returns the message id."""
        message_id = "q" + uuid.uuid4().hex[:16]
        with self.db.write() as conn:
            conn.execute(
                "INSERT INTO queue (id, target, sender_session, sender_agent, content, at) VALUES (?, ?, ?, ?, ?, ?)",
                (message_id, target, sender_session, sender_agent, content, now_ms()),
            )
        return message_id

    def take_queued(self, target: str, *, limit: int = 100) -> list[dict[str, Any]]:
        """Take (and mark taken) the messages queued for ``target``, oldest first — what a host delivers."""
        with self.db.write() as conn:
            rows = conn.execute(
                "SELECT id, sender_session, sender_agent, content, at FROM queue WHERE target = ? AND taken_at IS NULL"
                " ORDER BY at, id LIMIT ?",
                (target, limit),
            ).fetchall()
            conn.executemany("UPDATE queue SET taken_at = ? WHERE id = ?", [(now_ms(), r[0]) for r in rows])
        return [{"id": r[0], "from_session": r[1], "from_agent": r[2], "content": r[3], "at": iso(r[4])} for r in rows]

    def search(self, query: str, *, agent: str | None, limit: int) -> list[dict[str, Any]]:
        """Transcript messages matching ``query`` (BM25), best first, at most ``limit`` per call."""
        words = terms(query)
        if not words:
            return []
        sql = (
            "SELECT m.session, m.role, m.content, m.at, -bm25(messages_fts) AS s FROM messages_fts"
            " JOIN messages m ON m.rowid = messages_fts.rowid"
        )
        params: list[Any] = [fts_query(words)]
        sql += " JOIN sessions x ON x.key = m.session WHERE messages_fts MATCH ?"
        if agent is not None:
            sql += " AND x.agent = ?"
            params.append(agent)
        sql += " ORDER BY s DESC LIMIT ?"
        params.append(limit)
        with self.db.read() as conn:
            rows = conn.execute(sql, params).fetchall()
        return [{"session": r[0], "role": r[1], "content": r[2], "at": r[3], "score": r[4]} for r in rows]


def _session(row: Any) -> dict[str, Any]:
    keys = (
        "key",
        "agent_id",
        "topic",
        "created_at",
        "updated_at",
        "closed_at",
        "completed_at",
        "parent",
        "message_count",
        "last_message_preview",
    )
    out = dict(zip(keys, row, strict=True))
    for key in ("created_at", "updated_at", "closed_at", "completed_at"):
        out[key] = iso(out[key])
    return {k: v for k, v in out.items() if v is not None}


_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")


def extract(texts: list[str], ratio: float = 0.25, max_chars: int = 8000) -> str:
    """An extract (not a summary): the sentences richest in the transcript's frequent words, in order."""
    sentences = [s.strip() for t in texts for s in _SENTENCE.split(t) if s.strip()]
    if not sentences:
        return ""
    freq = Counter(w for s in sentences for w in set(terms(s)))
    scored = []
    for i, s in enumerate(sentences):
        words = terms(s)
        score = sum(freq[w] for w in set(words)) / (len(words) + 4) if words else 0.0
        scored.append((score, i))
    budget = min(max_chars, max(200, int(sum(len(s) for s in sentences) * ratio)))
    chosen: list[int] = []
    used = 0
    for _, i in sorted(scored, reverse=True):
        if used + len(sentences[i]) > budget and chosen:
            continue
        chosen.append(i)
        used += len(sentences[i]) + 1
    return " ".join(sentences[i] for i in sorted(chosen))
