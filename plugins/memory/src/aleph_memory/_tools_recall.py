"""recall_events, ctx_search, tool_usage and governance_metrics: reading what the chokepoint recorded."""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
from typing import Any, Literal

from pydantic import Field

import aleph
from aleph_memory._base import FamilyTool, in_thread
from aleph_memory._items import iso, now_ms
from aleph_memory._provenance import call_info
from aleph_memory._text import FTS_TOKENIZE, fts_query, terms

__all__ = ["CtxSearchTool", "GovernanceMetricsTool", "RecallEventsTool", "ToolUsageTool"]

READ = aleph.ToolFacts(idempotent=True, concurrent_safe=True, max_duration_ms=30_000, tags=("memory",))
MAX_SPILL_FILES = 2000
MAX_SPILL_BYTES = 32 * 1024 * 1024
SECTION_CHARS = 2000
LEDGER_WINDOW = 100_000


def _bm25(docs: list[tuple[str, ...]], query: str, limit: int, weights: str) -> list[tuple[int, float, str]]:
    """Rank ``docs`` (tuples of text columns) for ``query`` in a throwaway in-memory FTS5 table."""
    words = terms(query)
    if not words or not docs:
        return []
    cols = ", ".join(f"c{i}" for i in range(len(docs[0])))
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute(f"CREATE VIRTUAL TABLE d USING fts5({cols}, tokenize='{FTS_TOKENIZE}')")
        conn.executemany(
            f"INSERT INTO d (rowid, {cols}) VALUES (?, {', '.join('?' * len(docs[0]))})",
            [(i, *doc) for i, doc in enumerate(docs)],
        )
        return [
            (r[0], round(-r[1], 4), r[2])
            for r in conn.execute(
                f"SELECT rowid, bm25(d, {weights}) AS s, snippet(d, -1, '[', ']', '…', 24) FROM d WHERE d MATCH ?"
                " ORDER BY s LIMIT ?",
                (fts_query(words), limit),
            )
        ]
    finally:
        conn.close()


class EventsArgs(aleph.ToolArgs):
    query: str = Field(min_length=1, max_length=2000)
    """What happened earlier in this session (a tool, a file, an error)."""
    limit: int = Field(default=5, ge=1, le=20)
    """Events returned at most."""


class RecallEventsTool(FamilyTool):
    NAME = "recall_events"
    DESCRIPTION = (
        "Search this session's event log (every tool call that ran, failed, was refused or approved) and its"
        " transcript, by keywords. Use it to find what you already did earlier in this conversation."
    )
    Args = EventsArgs
    FACTS = READ

    async def call(self, args: EventsArgs) -> dict[str, Any]:
        call = call_info(self.NAME)
        if not call.session or await in_thread(self.rt.sessions.foreign, call.session, call.agent):
            return {  # another agent's session key reads like no session at all
                "query": args.query,
                "matched": 0,
                "hits": [],
                "note": "No active session context — recall_events is unavailable here.",
            }
        events = self.rt.events
        docs: list[tuple[str, ...]] = []
        meta: list[dict[str, Any]] = []
        if events is not None:
            for seq, event in enumerate(await in_thread(events.events, call.session, 10_000), 1):
                docs.append((event.tool, f"{event.kind} {event.detail}"))
                meta.append(
                    {"seq": seq, "kind": event.kind, "tool": event.tool, "at": iso(event.at_ms), "by": event.by}
                )
        for message in await in_thread(
            self.rt.sessions.messages, call.session, owner=call.agent, include_compacted=True
        ):
            docs.append(("", message.content))
            meta.append({"kind": f"{message.role}_message", "at": iso(message.at)})
        if not docs:
            note = "Session event log is not available in this deployment." if events is None else None
            return {
                "query": args.query,
                "matched": 0,
                "hits": [],
                "note": note or f"No earlier events matched {args.query!r} this session; try different keywords.",
            }
        ranked = await in_thread(_bm25, docs, args.query, args.limit, "2.0, 1.0")
        hits = [{**meta[i], "excerpt": snippet} for i, _, snippet in ranked]
        out: dict[str, Any] = {"query": args.query, "matched": len(hits), "hits": hits}
        if not hits:
            out["note"] = f"No earlier events matched {args.query!r} this session; try different keywords."
        return out


class CtxArgs(aleph.ToolArgs):
    query: str = Field(min_length=1, max_length=2000)
    """What to find inside large tool outputs that were saved to disk instead of shown in full."""
    limit: int = Field(default=5, ge=1, le=20)
    """Sections returned at most."""


class CtxSearchTool(FamilyTool):
    NAME = "ctx_search"
    DESCRIPTION = (
        "Search the full text of this session's large tool outputs that were saved to disk ('[Full output"
        " persisted: …]') and shown only as a preview; returns the matching sections."
    )
    Args = CtxArgs
    FACTS = READ

    async def call(self, args: CtxArgs) -> dict[str, Any]:
        call = call_info(self.NAME)
        session = call.session or "default"
        folder = self.rt.context.data_dir / "tool_results" / re.sub(r"[^A-Za-z0-9_.-]", "_", session)
        sections = await in_thread(_sections, folder)
        if not sections:
            return {
                "query": args.query,
                "matched": 0,
                "indexed_sections": 0,
                "hits": [],
                "note": "No offloaded tool output is indexed in this session yet.",
            }
        ranked = await in_thread(_bm25, [(s[2], s[3]) for s in sections], args.query, args.limit, "2.0, 1.0")
        hits = [
            {"source": sections[i][0], "section": sections[i][1], "title": sections[i][2], "excerpt": snippet}
            for i, _, snippet in ranked
        ]
        out: dict[str, Any] = {
            "query": args.query,
            "matched": len(hits),
            "indexed_sections": len(sections),
            "hits": hits,
        }
        if not hits:
            out["note"] = (
                f"No sections matched {args.query!r} across {len(sections)} indexed sections; try different keywords."
            )
        return out


def _sections(folder: Any) -> list[tuple[str, int, str, str]]:
    """(file name, section number, title, text) of every spilled output under ``folder``."""
    out: list[tuple[str, int, str, str]] = []
    try:
        names = sorted(
            e.name for e in os.scandir(folder) if e.is_file(follow_symlinks=False) and e.name.endswith(".txt")
        )
    except OSError:
        return []
    for name in names[-MAX_SPILL_FILES:]:
        with contextlib.suppress(OSError, UnicodeDecodeError):
            fd = os.open(folder / name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            with os.fdopen(fd, "rb") as fh:
                text = fh.read(MAX_SPILL_BYTES).decode("utf-8", "replace")
            for number, (title, body) in enumerate(_split(text), 1):
                out.append((name, number, title, body))
    return out


def _split(text: str) -> list[tuple[str, str]]:
    """Sections of about SECTION_CHARS at line boundaries; a Markdown heading starts a new one and titles it."""
    parts: list[tuple[str, str]] = []
    title, size = "", 0
    buf: list[str] = []
    for line in text.splitlines():
        heading = line.startswith("#")
        if buf and (heading or size + len(line) > SECTION_CHARS):
            parts.append((title, "\n".join(buf)))
            buf, size = [], 0
            if not heading:
                title = title or ""
        if heading:
            title = line.lstrip("#").strip()[:200]
        buf.append(line[: SECTION_CHARS * 2])
        size += len(line) + 1
    if buf:
        parts.append((title, "\n".join(buf)))
    return parts


def _ledger_rows(rt: Any, agent: str) -> list[Any] | None:
    ledger = rt.ledger
    if ledger is None:
        return None
    with contextlib.suppress(Exception):
        ledger.flush_sync(timeout=5.0)  # rows of calls that just returned may still be queued
        return list(ledger.rows(agent, limit=LEDGER_WINDOW))
    return None


class UsageArgs(aleph.ToolArgs):
    scope: Literal["all", "mcp", "plugin", "builtin"] = "all"
    """Which tools: all, MCP server tools (``server__tool``), plugin tools, or Aleph's own."""
    idle_days: int | None = Field(default=None, ge=0, le=3650)
    """Only tools unused for at least this many days (or never used)."""


class ToolUsageTool(FamilyTool):
    NAME = "tool_usage"
    DESCRIPTION = (
        "Report how each tool has been used, from the signed ledger: calls, errors, refusals, first and last use,"
        " idle days. Read-only tools are not ledgered, so their count shows '—' (not measured), which is not 0."
    )
    Args = UsageArgs
    FACTS = READ

    async def call(self, args: UsageArgs) -> dict[str, Any]:
        call = call_info(self.NAME)
        rows = await in_thread(_ledger_rows, self.rt, call.agent)
        if rows is None:
            raise aleph.ExecutionFailed(self.NAME, "ledger not available: enable [ledger] to measure tool usage")
        stats: dict[str, dict[str, Any]] = {}
        for row in rows:
            if row.action not in ("tool_call", "tool_denied"):
                continue
            entry = stats.setdefault(
                row.target, {"calls": 0, "errors": 0, "denied": 0, "first": row.at_ms, "last": row.at_ms}
            )
            if row.action == "tool_denied":
                entry["denied"] += 1
            else:
                entry["calls"] += 1
                entry["errors"] += row.outcome == "error"
            entry["first"] = min(entry["first"], row.at_ms)
            entry["last"] = max(entry["last"], row.at_ms)
        known = await self._definitions(call.agent)
        names = sorted(set(stats) | set(known))
        now = now_ms()
        entries = []
        for name in names:
            kind = known.get(name, ("mcp" if "__" in name else "unknown", None))
            if args.scope != "all" and kind[0] != args.scope:
                continue
            s = stats.get(name)
            idle = (now - s["last"]) // 86_400_000 if s else None
            if args.idle_days is not None and idle is not None and idle < args.idle_days:
                continue
            read_only = kind[1] is True
            entries.append(
                {
                    "id": name,
                    "kind": kind[0],
                    "usage": "—" if read_only and not s else (s["calls"] if s else 0),
                    "errors": s["errors"] if s else 0,
                    "denied": s["denied"] if s else 0,
                    "first_used_at": iso(s["first"]) if s else None,
                    "last_used_at": iso(s["last"]) if s else None,
                    "idle_days": idle,
                }
            )
        summary = f"{len(entries)} entr{'y' if len(entries) == 1 else 'ies'}"
        if args.scope != "all":
            summary += f" in scope {args.scope}"
        out: dict[str, Any] = {"summary": summary, "entries": entries}
        if not known:
            out["unavailable"] = ["registry"]
            out["summary"] += " — INCOMPLETE, could not enumerate the installed tools"
        return out

    async def _definitions(self, agent: str) -> dict[str, tuple[str, bool]]:
        factory = getattr(self.rt.context, "tool_service", None)
        if factory is None:
            return {}
        try:
            # The whole principal (its channel's layer, everyone it acts for): a tool hidden from the caller
            # stays hidden here too. The bare agent's list would name tools its channel or chain denies.
            principal = aleph.current_principal()
            service = factory(principal=principal) if principal is not None else factory(agent=agent)
            definitions = await service.list()
        except Exception:
            return {}
        return {d.name: (d.source.type, d.facts.idempotent) for d in definitions}


class MetricsArgs(aleph.ToolArgs):
    window_days: int = Field(default=7, ge=1, le=365)
    """How many days back to count."""


class GovernanceMetricsTool(FamilyTool):
    NAME = "governance_metrics"
    DESCRIPTION = (
        "Count what governed this agent over a window: user corrections, memory writes and injections, tool"
        " calls, errors, refusals and approvals from the signed ledger."
    )
    Args = MetricsArgs
    FACTS = READ

    async def call(self, args: MetricsArgs) -> dict[str, Any]:
        call = call_info(self.NAME)
        since = max(0, now_ms() - args.window_days * 86_400_000)
        with self.memory.db.read() as conn:
            corrections = conn.execute(
                "SELECT count(*) FROM items WHERE agent = ? AND kind = 'correction' AND created_at > ?",
                (call.agent, since),
            ).fetchone()[0]
            memory = dict(
                conn.execute(
                    "SELECT event, count(*) FROM provenance WHERE agent = ? AND at > ? GROUP BY event",
                    (call.agent, since),
                ).fetchall()
            )
        out: dict[str, Any] = {
            "window_days": args.window_days,
            "since_epoch_secs": since // 1000,
            "corrections": corrections,
            "memory_events": memory,
        }
        rows = await in_thread(_ledger_rows, self.rt, call.agent)
        if rows is None:
            out["ledger"] = None
            out["note"] = "ledger not available: tool-call counts are not measured"
            return out
        counts: dict[str, int] = {}
        for row in rows:
            if row.at_ms > since:
                key = f"{row.action}:{row.outcome}"
                counts[key] = counts.get(key, 0) + 1
        out["ledger"] = dict(sorted(counts.items()))
        return out
