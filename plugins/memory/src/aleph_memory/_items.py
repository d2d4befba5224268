"""Memory items: facts, dialog turns, corrections, outcomes and compacted chunks, with validity intervals.

A fact about a subject is never overwritten: a newer fact about the same subject (or a ``replace``)
closes the older one (``valid_to``, ``status="superseded"``, ``superseded_by``) and links back to it
(``supersedes``); ``forget`` closes a fact without a successor (``status="forgotten"``). Rows are
never deleted, so the history of every fact stays readable. Only active items are in the full-text
index. A dialog turn's neighbours in its session (two before, two after) are indexed with it as
context, because the words of a question and of its answer are usually split across turns.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from aleph_memory._db import Database
from aleph_memory._events import mentions_last_talk, resolve_events
from aleph_memory._places import places
from aleph_memory._text import FTS_TOKENIZE, lemma, terms
from aleph_memory._text import stem as stem_word

__all__ = ["CONTEXT_WINDOW", "Item", "ItemKind", "ItemStore", "NewItem", "Source", "fts_table"]

ItemKind = Literal["fact", "turn", "correction", "outcome", "chunk"]
KINDS: tuple[str, ...] = ("fact", "turn", "correction", "outcome", "chunk")
CONTEXT_WINDOW = 2
"""Neighbouring turns on each side indexed as an item's context."""

_COLUMNS = (
    "rowid, id, agent, kind, content, subject, speaker, session, seq, ref, source_turn, source_call,"
    " occurred_at, created_at, valid_from, valid_to, status, superseded_by, supersedes, extra"
)


def now_ms() -> int:
    """The current time in epoch milliseconds."""
    return time.time_ns() // 1_000_000


def new_id() -> str:
    """A fresh memory id: ``m`` and 16 hex digits (random, so writers in many processes never collide)."""
    return "m" + os.urandom(8).hex()


def iso(ms: int | None) -> str | None:
    """Epoch milliseconds as an ISO 8601 UTC timestamp."""
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def fts_table(agent: str) -> str:
    """The agent's own full-text table: searches never share an index, so one agent's size never slows another."""
    return "fts_" + hashlib.sha256(agent.encode()).hexdigest()[:24]


def content_hash(text: str) -> str:
    """The identity of a fact's text (whitespace-normalised, case-folded)."""
    return hashlib.sha256(" ".join(text.split()).casefold().encode()).hexdigest()[:32]


@dataclass(frozen=True, slots=True)
class Source:
    """Where a write came from: the session, turn (run) and tool call that made it."""

    session: str | None = None
    turn: str | None = None
    call_id: str | None = None


@dataclass(slots=True)
class NewItem:
    """An item to store. ``occurred_at`` is when the thing happened (ms), defaulting to now."""

    content: str
    kind: ItemKind = "fact"
    subject: str | None = None
    speaker: str | None = None
    session: str | None = None
    seq: int | None = None
    ref: str | None = None
    occurred_at: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Item:
    """A stored item."""

    rowid: int
    id: str
    agent: str
    kind: str
    content: str
    subject: str | None
    speaker: str | None
    session: str | None
    seq: int | None
    ref: str | None
    source_turn: str | None
    source_call: str | None
    occurred_at: int | None
    created_at: int
    valid_from: int
    valid_to: int | None
    status: str
    superseded_by: str | None
    supersedes: str | None
    extra: dict[str, Any]

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> Item:
        """Build from a row selected with the store's column list."""
        values = list(row)
        values[-1] = json.loads(values[-1]) if values[-1] else {}
        return cls(*values)

    def to_json(self, *, full: bool = False) -> dict[str, Any]:
        """The item as a model sees it: empty fields left out; ``full`` adds validity and source."""
        out: dict[str, Any] = {"id": self.id, "kind": self.kind, "content": self.content}
        for key in ("subject", "speaker", "session", "ref"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        if self.occurred_at is not None:
            out["occurred_at"] = iso(self.occurred_at)
        if full:
            out["status"] = self.status
            out["valid_from"] = iso(self.valid_from)
            out["valid_to"] = iso(self.valid_to)
            for key in ("supersedes", "superseded_by", "source_turn", "source_call"):
                value = getattr(self, key)
                if value is not None:
                    out[key] = value
            if self.extra:
                out["extra"] = self.extra
        return out


class ItemStore:
    """Items of every agent in one :class:`Database`."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._tables: set[str] = set()

    # -- reads -----------------------------------------------------------------------------------

    def get(self, item_id: str, *, owner: str) -> Item | None:
        """``owner``'s item with ``item_id`` (any status), or None: another agent's item is a missing one."""
        with self.db.read() as conn:
            row = conn.execute(f"SELECT {_COLUMNS} FROM items WHERE id = ? AND agent = ?", (item_id, owner)).fetchone()
        return Item.from_row(row) if row else None

    def by_rowids(self, rowids: Iterable[int]) -> dict[int, Item]:
        """Items by rowid."""
        ids = list(rowids)
        out: dict[int, Item] = {}
        with self.db.read() as conn:
            for start in range(0, len(ids), 500):
                chunk = ids[start : start + 500]
                marks = ",".join("?" * len(chunk))
                for row in conn.execute(f"SELECT {_COLUMNS} FROM items WHERE rowid IN ({marks})", chunk):
                    item = Item.from_row(row)
                    out[item.rowid] = item
        return out

    def active(self, agent: str, kinds: Sequence[str] = ("fact",), *, limit: int = 1000) -> list[Item]:
        """The agent's currently valid items of ``kinds``, newest first."""
        marks = ",".join("?" * len(kinds))
        with self.db.read() as conn:
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM items WHERE agent = ? AND status = 'active' AND kind IN ({marks})"
                " ORDER BY rowid DESC LIMIT ?",
                (agent, *kinds, limit),
            ).fetchall()
        return [Item.from_row(r) for r in rows]

    def count_active(self, agent: str, kinds: Sequence[str] = ("fact",)) -> int:
        """How many of the agent's items of ``kinds`` are currently valid."""
        marks = ",".join("?" * len(kinds))
        with self.db.read() as conn:
            row = conn.execute(
                f"SELECT count(*) FROM items WHERE agent = ? AND status = 'active' AND kind IN ({marks})",
                (agent, *kinds),
            ).fetchone()
        return int(row[0])

    def history(self, item_id: str, *, owner: str, limit: int = 200) -> list[Item]:
        """Every version of ``owner``'s fact ``item_id`` belongs to, oldest first ([] for another agent's)."""
        start = self.get(item_id, owner=owner)
        if start is None:
            return []
        chain = [start]
        seen = {start.id}
        one = f"SELECT {_COLUMNS} FROM items WHERE id = ? AND agent = ?"  # a chain never crosses owners
        with self.db.read() as conn:
            current = start
            while current.supersedes and current.supersedes not in seen and len(chain) < limit:
                row = conn.execute(one, (current.supersedes, owner)).fetchone()
                if row is None:
                    break
                current = Item.from_row(row)
                seen.add(current.id)
                chain.insert(0, current)
            current = start
            while current.superseded_by and current.superseded_by not in seen and len(chain) < limit:
                row = conn.execute(one, (current.superseded_by, owner)).fetchone()
                if row is None:
                    break
                current = Item.from_row(row)
                seen.add(current.id)
                chain.append(current)
        return chain

    def speakers(self, agent: str) -> set[str]:
        """Distinct speakers of the agent's items (the people a query may name)."""
        with self.db.read() as conn:
            rows = conn.execute(
                "SELECT DISTINCT speaker FROM items WHERE agent = ? AND speaker IS NOT NULL", (agent,)
            ).fetchall()
        return {r[0] for r in rows}

    def neighbours(self, agent: str, session: str, seq: int, window: int = 1) -> list[Item]:
        """The agent's active turns within ``window`` of ``seq`` in ``session`` (not the turn itself)."""
        with self.db.read() as conn:
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM items WHERE agent = ? AND session = ? AND kind = 'turn' AND status = 'active'"
                " AND seq BETWEEN ? AND ? AND seq != ? ORDER BY seq",
                (agent, session, seq - window, seq + window, seq),
            ).fetchall()
        return [Item.from_row(r) for r in rows]

    def session_items(self, agent: str, session: str, kinds: Sequence[str], *, limit: int = 1000) -> list[Item]:
        """The agent's active items of ``kinds`` from ``session``, in storage order."""
        marks = ",".join("?" * len(kinds))
        with self.db.read() as conn:
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM items WHERE agent = ? AND session = ? AND status = 'active'"
                f" AND kind IN ({marks}) ORDER BY rowid LIMIT ?",
                (agent, session, *kinds, limit),
            ).fetchall()
        return [Item.from_row(r) for r in rows]

    # -- writes (call inside ``db.write()``) ------------------------------------------------------

    def ensure_fts(self, conn: sqlite3.Connection, agent: str) -> str:
        """Create the agent's full-text table (and its vocabulary view) on first write; returns its name."""
        table = fts_table(agent)
        if table not in self._tables:
            conn.execute(
                f"CREATE VIRTUAL TABLE IF NOT EXISTS {table} USING fts5(content, ctx, tokenize='{FTS_TOKENIZE}')"
            )
            conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {table}_vocab USING fts5vocab({table}, 'row')")
            self._tables.add(table)
        return table

    def insert(self, conn: sqlite3.Connection, agent: str, item: NewItem, source: Source, at: int) -> Item:
        """Insert one item; a fact is indexed at once, a turn by :meth:`reindex_context` (with its neighbours)."""
        return self._insert_many(conn, agent, [item], source, at, index=item.kind != "turn")[0]

    def _insert_many(
        self, conn: sqlite3.Connection, agent: str, items: Sequence[NewItem], source: Source, at: int, *, index: bool
    ) -> list[Item]:
        table = self.ensure_fts(conn, agent)
        out = []
        rows = []
        direct = []
        next_seq: dict[str, int] = {}
        # Rowids are assigned here, inside the write transaction (BEGIN IMMEDIATE holds the only writer
        # lock), so the whole batch goes in with one executemany instead of one statement per item.
        last = conn.execute("SELECT max(rowid) FROM items").fetchone()[0] or 0
        for offset, item in enumerate(items):
            session = item.session if item.session is not None else source.session
            seq = item.seq
            if item.kind == "turn" and seq is None and session is not None:
                if session not in next_seq:
                    row = conn.execute(
                        "SELECT max(seq) FROM items WHERE agent = ? AND session = ? AND kind = 'turn'", (agent, session)
                    ).fetchone()
                    next_seq[session] = (row[0] or 0) + 1
                seq = next_seq[session]
                next_seq[session] += 1
            words = [lemma(w) for w in terms(item.content)]
            norm = " ".join(words)
            own = " ".join(sorted({stem_word(w) for w in words}))
            rowid = last + 1 + offset
            item_id = new_id()
            occurred = item.occurred_at if item.occurred_at is not None else at
            extra = json.dumps(item.extra, sort_keys=True) if item.extra else None
            rows.append(
                (
                    rowid,
                    item_id,
                    agent,
                    item.kind,
                    item.content,
                    content_hash(item.content),
                    item.subject,
                    item.speaker,
                    session,
                    seq,
                    item.ref,
                    source.turn,
                    source.call_id,
                    occurred,
                    at,
                    at,
                    own,
                    norm,
                    extra,
                )
            )
            if index or item.kind != "turn" or seq is None:
                direct.append((rowid, norm))
            out.append(
                Item(
                    rowid,
                    item_id,
                    agent,
                    item.kind,
                    item.content,
                    item.subject,
                    item.speaker,
                    session,
                    seq,
                    item.ref,
                    source.turn,
                    source.call_id,
                    occurred,
                    at,
                    at,
                    None,
                    "active",
                    None,
                    None,
                    dict(item.extra),
                )
            )
        conn.executemany(
            "INSERT INTO items (rowid, id, agent, kind, content, content_hash, subject, speaker, session, seq, ref,"
            " source_turn, source_call, occurred_at, created_at, valid_from, status, stems, norm, extra)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'active', ?, ?, ?)",
            rows,
        )
        conn.executemany(f"INSERT INTO {table} (rowid, content, ctx) VALUES (?, ?, '')", direct)
        # Bi-temporal: beside when it was said (occurred_at), when what it tells of happened.
        conn.executemany(
            "INSERT INTO item_events (rowid, agent, start, end, confidence, said) VALUES (?, ?, ?, ?, ?, ?)",
            [
                (item.rowid, agent, e.start, e.end, e.confidence, e.said)
                for item in out
                for e in resolve_events(
                    item.content,
                    item.occurred_at if item.occurred_at is not None else at,
                    _previous_talk(conn, item) if mentions_last_talk(item.content) else None,
                )
            ],
        )
        # The places each item names, for questions that ask for a kind of place (see _places).
        people = frozenset(w.lower() for p in {i.speaker for i in out if i.speaker} for w in p.split())
        conn.executemany(
            "INSERT INTO item_places (rowid, agent, name) VALUES (?, ?, ?)",
            [(item.rowid, agent, name) for item in out for name in places(item.content, people)],
        )
        return out

    def reindex_context(
        self,
        conn: sqlite3.Connection,
        agent: str,
        touched: Iterable[tuple[str, int]],
        fresh: frozenset[int] = frozenset(),
    ) -> None:
        """Index turns ``touched`` ((session, seq) pairs) and their neighbours with their neighbours as context.

        ``fresh`` rows were inserted in this transaction and are not in the full-text table yet.
        """
        table = self.ensure_fts(conn, agent)
        by_session: dict[str, set[int]] = {}
        for session, seq in touched:
            by_session.setdefault(session, set()).add(seq)
        w = CONTEXT_WINDOW
        updates, inserts, deletes = [], [], []
        for session, seqs in by_session.items():
            low, high = min(seqs) - 2 * w, max(seqs) + 2 * w
            rows = conn.execute(
                "SELECT rowid, seq, norm, stems, status FROM items"
                " WHERE agent = ? AND session = ? AND kind = 'turn' AND seq BETWEEN ? AND ? ORDER BY seq",
                (agent, session, low, high),
            ).fetchall()
            at = {r[1]: r for r in rows}
            dirty = {s + d for s in seqs for d in range(-w, w + 1)}
            for seq in sorted(dirty):
                row = at.get(seq)
                if row is None or row[4] != "active":
                    continue
                around = [at[s] for s in range(seq - w, seq + w + 1) if s != seq and s in at]
                ctx = " ".join(r[2] for r in around)
                ctx_stems = set().union(*(r[3].split() for r in around)) if around else set()
                updates.append((" ".join(sorted(ctx_stems)), row[0]))
                if row[0] not in fresh:
                    deletes.append((row[0],))
                inserts.append((row[0], row[2], ctx))
        conn.executemany("UPDATE items SET ctx_stems = ? WHERE rowid = ?", updates)
        conn.executemany(f"DELETE FROM {table} WHERE rowid = ?", deletes)
        conn.executemany(f"INSERT INTO {table} (rowid, content, ctx) VALUES (?, ?, ?)", inserts)

    def close_item(
        self, conn: sqlite3.Connection, item: Item, status: Literal["superseded", "forgotten"], at: int, by: str | None
    ) -> None:
        """Close ``item``'s validity interval and take it out of the full-text index (the row stays)."""
        conn.execute(
            "UPDATE items SET status = ?, valid_to = ?, superseded_by = ? WHERE rowid = ? AND status = 'active'",
            (status, at, by, item.rowid),
        )
        conn.execute(f"DELETE FROM {self.ensure_fts(conn, item.agent)} WHERE rowid = ?", (item.rowid,))

    def link_supersedes(self, conn: sqlite3.Connection, new: Item, old: Item) -> Item:
        """Record that ``new`` supersedes ``old``."""
        conn.execute("UPDATE items SET supersedes = ? WHERE rowid = ?", (old.id, new.rowid))
        row = conn.execute(f"SELECT {_COLUMNS} FROM items WHERE rowid = ?", (new.rowid,)).fetchone()
        return Item.from_row(row)

    def active_by_subject(self, conn: sqlite3.Connection, agent: str, subject: str) -> list[Item]:
        """The agent's active facts about ``subject``."""
        rows = conn.execute(
            f"SELECT {_COLUMNS} FROM items WHERE agent = ? AND subject = ? AND status = 'active' AND kind = 'fact'",
            (agent, subject),
        ).fetchall()
        return [Item.from_row(r) for r in rows]

    def active_matching(self, conn: sqlite3.Connection, agent: str, text: str, *, limit: int = 50) -> list[Item]:
        """The agent's active facts whose content contains ``text`` (case-insensitive substring)."""
        pattern = "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        rows = conn.execute(
            f"SELECT {_COLUMNS} FROM items WHERE agent = ? AND status = 'active' AND kind = 'fact'"
            " AND content LIKE ? ESCAPE '\\' ORDER BY rowid LIMIT ?",
            (agent, pattern, limit),
        ).fetchall()
        return [Item.from_row(r) for r in rows]

    def duplicate_of(self, conn: sqlite3.Connection, agent: str, kind: str, text: str) -> Item | None:
        """The agent's active item of ``kind`` with the same text, if any."""
        row = conn.execute(
            f"SELECT {_COLUMNS} FROM items WHERE agent = ? AND kind = ? AND content_hash = ? AND status = 'active'",
            (agent, kind, content_hash(text)),
        ).fetchone()
        return Item.from_row(row) if row else None

    def store_many(
        self, conn: sqlite3.Connection, agent: str, items: Sequence[NewItem], source: Source, at: int
    ) -> list[Item]:
        """Insert many items in the caller's transaction and index them (turns with their context) once."""
        stored = self._insert_many(conn, agent, items, source, at, index=False)
        touched = [
            (s.session, s.seq) for s in stored if s.kind == "turn" and s.session is not None and s.seq is not None
        ]
        fresh = frozenset(s.rowid for s in stored if s.kind == "turn")
        self.reindex_context(conn, agent, touched, fresh)
        return stored

    def ingest(self, agent: str, items: Sequence[NewItem], source: Source = Source()) -> list[Item]:
        """Store many items in one transaction (dialog turns, imported notes): no supersession, no dedup."""
        with self.db.write() as conn:
            return self.store_many(conn, agent, items, source, now_ms())


def _previous_talk(conn: sqlite3.Connection, item: Item) -> int | None:
    """When the agent's conversation was last had before ``item``'s session: its latest earlier item elsewhere."""
    if item.occurred_at is None:
        return None
    row = conn.execute(
        "SELECT max(occurred_at) FROM items INDEXED BY items_by_time WHERE agent = ? AND occurred_at < ?"
        " AND session IS NOT ?",
        (item.agent, item.occurred_at, item.session),
    ).fetchone()
    return int(row[0]) if row and row[0] is not None else None
