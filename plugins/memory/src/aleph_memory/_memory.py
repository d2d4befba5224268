"""The memory service behind the tools: one SQLite file, the items, the ranker, providers and provenance.

Writes that change what an agent knows (:meth:`Memory.remember`) are all-or-nothing transactions:
each operation is checked, applied to the database inside ``BEGIN IMMEDIATE`` and either all of
them commit or none does. Every outcome is filed in the write-decision log, and every landed write
leaves provenance rows (indexed here, signed in the ledger by the chokepoint through the call context).
"""

from __future__ import annotations

import sqlite3
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import aleph
from aleph_memory._config import MemoryConfig
from aleph_memory._db import Database
from aleph_memory._guard import scan
from aleph_memory._items import Item, ItemStore, NewItem, Source, now_ms
from aleph_memory._provenance import CallInfo
from aleph_memory._providers import Providers
from aleph_memory._search import Ranker, SearchResult
from aleph_memory._vectorwork import VectorWorker

__all__ = ["Memory", "Op", "Rejected", "WriteOutcome"]

MAX_DECISIONS_PER_AGENT = 1000
RETRY_CAP = 3
_MAX_STREAKS = 256


class Rejected(Exception):
    """A soft refusal of a memory write: the reason is returned to the model, nothing was changed."""

    def __init__(self, reason: str, code: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.code = code


@dataclass(frozen=True, slots=True)
class Op:
    """One remember operation."""

    action: Literal["add", "replace", "remove"]
    content: str | None = None
    old_text: str | None = None
    subject: str | None = None


@dataclass(slots=True)
class WriteOutcome:
    """What a landed remember did: items written, superseded and forgotten."""

    written: list[Item] = field(default_factory=list)
    superseded: list[tuple[Item, Item]] = field(default_factory=list)
    forgotten: list[Item] = field(default_factory=list)
    skipped_duplicates: int = 0


class Memory:
    """Everything the memory, session and note tools share for one runtime."""

    def __init__(self, path: Path, config: MemoryConfig, providers: Providers) -> None:
        self.config = config
        self.providers = providers
        self.db = Database(path)
        self.items = ItemStore(self.db)
        self.ranker = Ranker(self.db, self.items)
        self._streaks: OrderedDict[str, int] = OrderedDict()
        self.vectors: VectorWorker | None = None
        """Writes the configured embedder's vectors in the background (None without an embedder)."""
        if providers.embedder_name is not None:
            self.vectors = VectorWorker(self.db, self._embedder)
            # At start it looks for items stored without vectors (a crash or kill before the worker wrote them).
            self.vectors.start()

    def _embedder(self) -> Any:
        embedder = self.providers.embedder()
        if embedder is None:  # the default embedder would not load: the worker stops, search says why
            raise aleph.ExecutionFailed("memory_search", self.providers.note or "no embedder")
        return embedder

    def close(self) -> None:
        """Stop the vector worker (what it has not embedded is found again at the next start), close the database."""
        if self.vectors is not None:
            self.vectors.close()
        self.db.close()

    def _embed_later(self, rowids: Sequence[int]) -> None:
        """Hand committed items to the vector worker: a write never waits for a model."""
        if self.vectors is not None and rowids:
            self.vectors.notify(rowids)

    # -- retry cap ------------------------------------------------------------------------------

    def rejection_streak(self, key: str, landed: bool) -> int:
        """Count consecutive soft rejections per turn key (bounded map); a landed write resets it."""
        if landed:
            self._streaks.pop(key, None)
            return 0
        count = self._streaks.pop(key, 0) + 1
        self._streaks[key] = count
        while len(self._streaks) > _MAX_STREAKS:
            self._streaks.popitem(last=False)
        return count

    # -- remember ---------------------------------------------------------------------------------

    def check_content(self, text: str | None, what: str = "content") -> str:
        """``text`` trimmed, or :class:`Rejected` when it is empty, too long, or unsafe to feed back into prompts."""
        value = (text or "").strip()
        if not value:
            raise Rejected(f"entry {what} is empty", "empty")
        if len(value) > self.config.max_fact_chars:
            raise Rejected(
                f"{what} is {len(value)} chars, over the {self.config.max_fact_chars}-char limit of one fact;"
                " store a shorter fact",
                "too_long",
            )
        threat = scan(value)
        if threat is not None:
            raise Rejected(
                f"content rejected by threat scanner ({threat}). Memory entries are injected into prompts"
                " and must be safe.",
                "scanner_rejected",
            )
        return value

    def _match(self, conn: sqlite3.Connection, agent: str, old_text: str | None, pending: set[str]) -> Item:
        needle = (old_text or "").strip()
        if not needle:
            raise Rejected("old_text is empty", "empty")
        found = [i for i in self.items.active_matching(conn, agent, needle) if i.id not in pending]
        distinct = {i.content for i in found}
        if not found:
            raise Rejected(f"no entry matched the substring `{needle}`", "no_match")
        if len(distinct) > 1:
            raise Rejected(f"multiple entries matched `{needle}`; provide a more specific substring", "ambiguous")
        return found[0]

    def remember(self, call: CallInfo, ops: Sequence[Op], *, atomic_batch: bool) -> WriteOutcome:
        """Apply ``ops`` for ``call.agent`` in one transaction; raises :class:`Rejected` and changes nothing."""
        agent = call.agent
        source = Source(call.session, call.turn, call.call_id)
        checked = []
        for i, op in enumerate(ops, 1):
            try:
                content = self.check_content(op.content) if op.action in ("add", "replace") else None
                if op.action in ("replace", "remove"):
                    self.check_content(op.old_text, "old_text") if op.old_text and op.old_text.strip() else None
                subject = _subject(op.subject)
            except Rejected as exc:
                raise _in_batch(exc, i, op, atomic_batch) from None
            checked.append((op, content, subject))
        at = now_ms()
        outcome = WriteOutcome()
        try:
            with self.db.write() as conn:
                closed: set[str] = set()
                for i, (op, content, subject) in enumerate(checked, 1):
                    try:
                        self._apply(conn, agent, op, content, subject, source, at, outcome, closed, atomic_batch)
                    except Rejected as exc:
                        raise _in_batch(exc, i, op, atomic_batch) from None
                active = self._count(conn, agent)
                if active > self.config.max_facts:
                    raise Rejected(
                        f"over budget: {active}/{self.config.max_facts} facts; replace or remove first"
                        if not atomic_batch
                        else f"after applying all {len(ops)} operations memory would hold {active}/"
                        f"{self.config.max_facts} facts — over budget; no operations were applied",
                        "over_budget",
                    )
                self._provenance(conn, call, outcome, at)
        except sqlite3.IntegrityError:
            # Another process stored the same fact between our check and our insert.
            raise Rejected("entry already exists (no duplicate added)", "duplicate") from None
        self._embed_later([item.rowid for item in outcome.written])
        return outcome

    def _count(self, conn: sqlite3.Connection, agent: str) -> int:
        row = conn.execute(
            "SELECT count(*) FROM items WHERE agent = ? AND kind = 'fact' AND status = 'active'", (agent,)
        ).fetchone()
        return int(row[0])

    def _apply(
        self,
        conn: sqlite3.Connection,
        agent: str,
        op: Op,
        content: str | None,
        subject: str | None,
        source: Source,
        at: int,
        outcome: WriteOutcome,
        closed: set[str],
        in_batch: bool,
    ) -> None:
        if op.action == "add":
            assert content is not None
            if self.items.duplicate_of(conn, agent, "fact", content) is not None:
                if in_batch:
                    outcome.skipped_duplicates += 1
                    return
                raise Rejected("entry already exists (no duplicate added)", "duplicate")
            older = self.items.active_by_subject(conn, agent, subject) if subject else []
            new = self.items.insert(conn, agent, NewItem(content, "fact", subject=subject), source, at)
            for old in older:
                self.items.close_item(conn, old, "superseded", at, new.id)
                new = self.items.link_supersedes(conn, new, old)
                outcome.superseded.append((old, new))
                closed.add(old.id)
            outcome.written.append(new)
        elif op.action == "replace":
            assert content is not None
            old = self._match(conn, agent, op.old_text, closed)
            if old.content == content:
                raise Rejected("the new content equals the entry it would replace", "duplicate")
            if self.items.duplicate_of(conn, agent, "fact", content) is not None:
                raise Rejected("entry already exists (no duplicate added)", "duplicate")
            new = self.items.insert(conn, agent, NewItem(content, "fact", subject=subject or old.subject), source, at)
            self.items.close_item(conn, old, "superseded", at, new.id)
            new = self.items.link_supersedes(conn, new, old)
            closed.add(old.id)
            outcome.superseded.append((old, new))
            outcome.written.append(new)
        else:
            old = self._match(conn, agent, op.old_text, closed)
            self.items.close_item(conn, old, "forgotten", at, None)
            closed.add(old.id)
            outcome.forgotten.append(old)

    def _provenance(self, conn: sqlite3.Connection, call: CallInfo, outcome: WriteOutcome, at: int) -> None:
        rows = []
        for item in outcome.written:
            event = "superseding" if item.supersedes else "remembered"
            rows.append((item.id, event, item.supersedes or ""))
        for old, new in outcome.superseded:
            rows.append((old.id, "superseded", new.id))
        for item in outcome.forgotten:
            rows.append((item.id, "forgotten", ""))
        self.add_provenance(conn, call, rows, at)

    def add_provenance(
        self, conn: sqlite3.Connection, call: CallInfo, rows: Sequence[tuple[str, str, str]], at: int
    ) -> None:
        """Index provenance events ``(memory_id, event, detail)`` of ``call``."""
        conn.executemany(
            "INSERT INTO provenance (memory_id, event, agent, session, turn, call_id, tool, at, detail)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(m, e, call.agent, call.session, call.turn, call.call_id, call.tool, at, d) for m, e, d in rows],
        )

    def provenance(self, memory_id: str, *, owner: str, limit: int = 500) -> list[dict[str, Any]]:
        """Indexed provenance events of ``owner``'s item ``memory_id``, oldest first ([] for another's)."""
        with self.db.read() as conn:
            rows = conn.execute(
                "SELECT event, agent, session, turn, call_id, tool, at, detail FROM provenance"
                " WHERE memory_id = ? AND EXISTS (SELECT 1 FROM items WHERE id = ? AND agent = ?)"
                " ORDER BY rowid LIMIT ?",
                (memory_id, memory_id, owner, limit),
            ).fetchall()
        keys = ("event", "agent", "session", "turn", "call_id", "tool", "at", "detail")
        return [dict(zip(keys, r, strict=True)) for r in rows]

    def session_events(self, session: str, *, owner: str, limit: int) -> list[dict[str, Any]]:
        """Provenance events of ``owner``'s items in ``session``, oldest first ([] for another agent's session)."""
        with self.db.read() as conn:
            rows = conn.execute(
                "SELECT p.memory_id, p.event, p.agent, p.turn, p.call_id, p.tool, p.at, p.detail FROM provenance p"
                " JOIN items i ON i.id = p.memory_id WHERE p.session = ? AND i.agent = ?"
                " AND NOT EXISTS (SELECT 1 FROM sessions s WHERE s.key = ? AND s.agent != ?)"
                " ORDER BY p.rowid LIMIT ?",
                (session, owner, session, owner, limit),
            ).fetchall()
        keys = ("memory_id", "event", "agent", "turn", "call_id", "tool", "at", "detail")
        return [dict(zip(keys, r, strict=True)) for r in rows]

    def decide(self, agent: str, action: str, reason: str, subject: str) -> None:
        """File one outcome in the write-decision log (capped per agent)."""
        with self.db.write() as conn:
            conn.execute(
                "INSERT INTO decisions (agent, action, reason, subject, at) VALUES (?, ?, ?, ?, ?)",
                (agent, action, reason, subject[:80], now_ms()),
            )
            conn.execute(
                "DELETE FROM decisions WHERE agent = ? AND rowid <= (SELECT rowid FROM decisions WHERE agent = ?"
                " ORDER BY rowid DESC LIMIT 1 OFFSET ?)",
                (agent, agent, MAX_DECISIONS_PER_AGENT),
            )

    def decisions(self, agent: str, contains: str, limit: int) -> list[dict[str, Any]]:
        """The newest write decisions whose subject contains ``contains`` (literal)."""
        pattern = "%" + contains.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        with self.db.read() as conn:
            rows = conn.execute(
                "SELECT action, reason, subject, at FROM decisions WHERE agent = ? AND subject LIKE ? ESCAPE '\\'"
                " ORDER BY rowid DESC LIMIT ?",
                (agent, pattern, limit),
            ).fetchall()
        return [{"action": a, "reason": r, "subject": s, "at": at} for a, r, s, at in rows]

    # -- other writes ----------------------------------------------------------------------------

    def store(self, call: CallInfo, items: Sequence[NewItem], event: str) -> list[Item]:
        """Store items (corrections, outcomes, chunks, ingested turns) with provenance ``event``."""
        at = now_ms()
        source = Source(call.session, call.turn, call.call_id)
        with self.db.write() as conn:
            stored = self.items.store_many(conn, call.agent, items, source, at)
            self.add_provenance(conn, call, [(s.id, event, s.kind) for s in stored], at)
        self._embed_later([s.rowid for s in stored])
        return stored

    # -- search ----------------------------------------------------------------------------------

    def search(
        self, agent: str, query: str, *, limit: int, kinds: Sequence[str] | None = None, session: str | None = None
    ) -> SearchResult:
        """Rank the agent's active items for ``query`` (hybrid when an embedder is configured)."""
        degraded = None
        embedder = None
        if self.providers.embedder_name is None:
            degraded = self.providers.note or "no embedding provider configured"
        elif (embedder := self.providers.embedder()) is None:
            degraded = self.providers.note
        else:
            failed = self.vectors.error if self.vectors is not None else None
            if failed is not None:
                degraded = (
                    f"vectors are not being written ({type(failed).__name__}: {failed});"
                    " items stored since are ranked by their words only"
                )
        return self.ranker.search(
            agent, query, limit=limit, kinds=kinds, session=session, embedder=embedder, degraded=degraded
        )


def _subject(value: str | None) -> str | None:
    if value is None:
        return None
    text = " ".join(value.split()).casefold()
    if not text:
        return None
    if len(text) > 128:
        raise Rejected("subject is longer than 128 characters", "too_long")
    threat = scan(value)  # shown beside the fact whenever it is recalled
    if threat is not None:
        raise Rejected(f"subject rejected by threat scanner ({threat})", "scanner_rejected")
    return text


def _in_batch(exc: Rejected, index: int, op: Op, batch: bool) -> Rejected:
    if not batch:
        return exc
    return Rejected(
        f"operation {index} ({op.action}) failed: {exc.reason} — no operations were applied (batch is all-or-nothing)",
        exc.code,
    )
