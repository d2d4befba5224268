"""memory_search, memory_explore, memory_timeline, memory_reflect and recall_context."""

from __future__ import annotations

import inspect
from typing import Any, Literal

from pydantic import Field

import aleph
from aleph_memory._base import FamilyTool, in_thread
from aleph_memory._guard import scan
from aleph_memory._items import Item, iso, now_ms
from aleph_memory._provenance import call_info, join_ids, record
from aleph_memory._search import Hit

__all__ = ["MemoryExploreTool", "MemoryReflectTool", "MemorySearchTool", "MemoryTimelineTool", "RecallContextTool"]

READ = aleph.ToolFacts(idempotent=True, concurrent_safe=True, max_duration_ms=30_000, tags=("memory",))
KINDS = Literal["fact", "turn", "correction", "outcome", "chunk"]


def _hit(hit: Hit) -> dict[str, Any]:
    out = hit.item.to_json()
    out["score"] = hit.score
    return out


class SearchArgs(aleph.ToolArgs):
    query: str = Field(min_length=1, max_length=2000)
    """What to look for, in plain words (names, topics, what happened)."""
    max_results: int = Field(default=10, ge=1, le=50)
    """How many items to return."""
    scope: Literal["all", "current_session", "both"] = "all"
    """``all``: everything remembered; ``current_session``: only items from this session; ``both``: the
    session's items first, then everything else."""
    kinds: list[KINDS] | None = Field(default=None, max_length=5)
    """Only these kinds of item (facts, dialog turns, corrections, task outcomes, compacted chunks)."""


class MemorySearchTool(FamilyTool):
    NAME = "memory_search"
    DESCRIPTION = (
        "Search long-term memory (facts you remembered, past dialog turns, corrections, task outcomes) by meaning"
        " and keywords. Returns the best items with ids, who said them and when. Use it before answering a"
        " question about the user or an earlier conversation."
    )
    Args = SearchArgs
    FACTS = READ

    async def call(self, args: SearchArgs) -> dict[str, Any]:
        call = call_info(self.NAME)
        kinds = list(args.kinds) if args.kinds else None
        if args.scope != "all" and not call.session:
            raise aleph.ExecutionFailed(self.NAME, f"scope {args.scope!r} needs a session; this call has none")
        if args.scope == "current_session":
            result = await in_thread(
                self.memory.search, call.agent, args.query, limit=args.max_results, kinds=kinds, session=call.session
            )
            hits = result.hits
        else:
            result = await in_thread(self.memory.search, call.agent, args.query, limit=args.max_results, kinds=kinds)
            hits = result.hits
            if args.scope == "both":
                local = await in_thread(
                    self.memory.search,
                    call.agent,
                    args.query,
                    limit=args.max_results,
                    kinds=kinds,
                    session=call.session,
                )
                seen = {h.item.id for h in local.hits}
                hits = (local.hits + [h for h in hits if h.item.id not in seen])[: args.max_results]
        out: dict[str, Any] = {
            "query": args.query,
            "facts": [_hit(h) for h in hits],
            "count": len(hits),
            "mode": result.mode,
        }
        if result.degraded:
            out["degraded"] = result.degraded
        if result.people:
            out["about"] = list(result.people)
        return out


class ExploreArgs(aleph.ToolArgs):
    query: str = Field(min_length=1, max_length=2000)
    """Where to start: the topic or question."""
    max_hops: int = Field(default=2, ge=1, le=4)
    """How many steps away from the first matches to follow."""
    max_per_hop: int = Field(default=5, ge=1, le=10)
    """New items taken at each step."""


class MemoryExploreTool(FamilyTool):
    NAME = "memory_explore"
    DESCRIPTION = (
        "Explore memory several steps out from a query: start at the best matches, then follow what each item"
        " leads to (the turns around it, earlier and later versions of a fact, items sharing its rare words)."
        " Use it for questions that join facts from different conversations."
    )
    Args = ExploreArgs
    FACTS = READ

    async def call(self, args: ExploreArgs) -> dict[str, Any]:
        call = call_info(self.NAME)
        seeds = (await in_thread(self.memory.search, call.agent, args.query, limit=3)).hits
        seen = {h.item.id for h in seeds}
        frontier = [h.item for h in seeds]
        expanded: list[dict[str, Any]] = []
        hops = 0
        for hop in range(1, args.max_hops + 1):
            found: list[dict[str, Any]] = []
            for item in frontier:
                for related, via in await in_thread(self._related, call.agent, item, args.query):
                    if related.item.id in seen or len(found) >= args.max_per_hop:
                        continue
                    seen.add(related.item.id)
                    entry = _hit(related)
                    entry.update(hop=hop, via=via, from_id=item.id)
                    found.append(entry)
            if not found:
                break
            hops = hop
            expanded.extend(found)
            frontier = [self.memory.items.get(e["id"], owner=call.agent) for e in found]  # type: ignore[misc]
            frontier = [f for f in frontier if f is not None]
        return {
            "seed_facts": [_hit(h) for h in seeds],
            "expanded_facts": expanded,
            "hops_performed": hops,
            "summary": f"Explored {len(seeds)} seed facts → discovered {len(expanded)} related facts"
            f" across {hops} hops",
        }

    def _related(self, agent: str, item: Item, query: str) -> list[tuple[Hit, str]]:
        out: list[tuple[Hit, str]] = []
        if item.session is not None and item.seq is not None:
            near = self.memory.items.neighbours(agent, item.session, item.seq)
            out.extend((Hit(i, 0.0), "neighbouring turn") for i in near)
        for version in self.memory.items.history(item.id, owner=agent):
            if version.id != item.id:
                out.append((Hit(version, 0.0), "another version of this fact"))
        for hit in self.memory.search(agent, f"{item.content} {query}", limit=5).hits:
            out.append((hit, "shares words"))
        return out


class TimelineArgs(aleph.ToolArgs):
    fact_id: str = Field(min_length=2, max_length=64, pattern=r"^m[0-9a-f]{16}$")
    """The id of a memory item (``m`` and 16 hex digits), as memory_search returns it."""


class MemoryTimelineTool(FamilyTool):
    NAME = "memory_timeline"
    DESCRIPTION = (
        "Show the history of one remembered fact: every version in order with when it was valid, what replaced"
        " it and why it ended (superseded or forgotten), and where each version came from."
    )
    Args = TimelineArgs
    FACTS = READ

    async def call(self, args: TimelineArgs) -> dict[str, Any]:
        owner = call_info(self.NAME).agent
        versions = await in_thread(self.memory.items.history, args.fact_id, owner=owner)
        if not versions:
            raise aleph.ExecutionFailed(
                self.NAME, f"no memory item with id {args.fact_id!r}; find ids with memory_search"
            )
        current = next((v for v in versions if v.status == "active"), None)
        out = []
        for v in versions:
            entry = v.to_json(full=True)
            entry["events"] = [
                {**e, "at": iso(e["at"])} for e in await in_thread(self.memory.provenance, v.id, owner=owner, limit=50)
            ]
            out.append(entry)
        return {
            "fact_id": args.fact_id,
            "subject": versions[-1].subject,
            "versions": out,
            "current_id": current.id if current else None,
            "is_valid": any(v.id == args.fact_id and v.status == "active" for v in versions),
        }


class ReflectArgs(aleph.ToolArgs):
    query: str = Field(min_length=1, max_length=2000)
    """The question to answer from memory."""
    max_sources: int = Field(default=10, ge=1, le=50)
    """How many memory items the answer may draw on."""
    extractive: bool = False
    """Without a summariser, return the best matching items themselves, marked as not a synthesis."""


class MemoryReflectTool(FamilyTool):
    NAME = "memory_reflect"
    DESCRIPTION = (
        "Answer a question by synthesising what long-term memory holds about it (a summariser reads the best"
        " memory_search matches and cites their ids). Use memory_search for the raw items."
    )
    Args = ReflectArgs
    FACTS = aleph.ToolFacts(idempotent=True, concurrent_safe=True, max_duration_ms=120_000, tags=("memory", "llm"))

    async def call(self, args: ReflectArgs) -> dict[str, Any]:
        call = call_info(self.NAME)
        hits = (await in_thread(self.memory.search, call.agent, args.query, limit=args.max_sources)).hits
        sources = [_hit(h) for h in hits]
        try:
            summarise = self.memory.providers.summariser(self.NAME)
        except aleph.ExecutionFailed:
            if not args.extractive:
                raise
            return {
                "query": args.query,
                "synthesis": None,
                "extractive": True,
                "note": "No summariser is installed: these are the stored items themselves, not a synthesis.",
                "sources": sources,
            }
        if not hits:
            return {"query": args.query, "synthesis": None, "sources": [], "note": "Nothing in memory matches."}
        texts = [f"[{h.item.id}] {h.item.content}" for h in hits]
        instructions = (
            f"Answer the question {args.query!r} using only these memory items; cite the ids in brackets you use."
        )
        answer = summarise(texts, instructions)
        text = await answer if inspect.isawaitable(answer) else answer
        return {"query": args.query, "synthesis": str(text), "sources": sources}


class RecallArgs(aleph.ToolArgs):
    query: str = Field(min_length=1, max_length=2000)
    """What the current turn needs to remember."""
    max_results: int = Field(default=5, ge=1, le=16)
    """How many memory items to bring into this turn."""


class RecallContextTool(FamilyTool):
    NAME = "recall_context"
    DESCRIPTION = (
        "Bring the memory relevant to this turn into context: this session's compacted earlier parts first, then"
        " long-term facts. Each injection is recorded (which items, into which session and turn)."
    )
    Args = RecallArgs
    FACTS = READ

    async def call(self, args: RecallArgs) -> dict[str, Any]:
        call = call_info(self.NAME)
        hits: list[Hit] = []
        if call.session:
            hits = (
                await in_thread(
                    self.memory.search, call.agent, args.query, limit=args.max_results, session=call.session
                )
            ).hits
        seen = {h.item.id for h in hits}
        if len(hits) < args.max_results:
            more = (await in_thread(self.memory.search, call.agent, args.query, limit=args.max_results)).hits
            hits += [h for h in more if h.item.id not in seen][: args.max_results - len(hits)]
        # What is brought into a prompt is scanned as it is brought in, whatever wrote it and whenever:
        # an item stored by another path (a transcript, a compaction, an older scanner) is withheld.
        withheld = []
        for h in hits:
            shown = "\n".join(v for v in (h.item.content, h.item.subject, h.item.speaker) if v)
            threat = scan(shown, transcript=h.item.kind in ("turn", "chunk"))
            if threat is not None:
                withheld.append({"id": h.item.id, "reason": f"withheld by the threat scanner ({threat})"})
        if withheld:
            blocked = {w["id"] for w in withheld}
            hits = [h for h in hits if h.item.id not in blocked]
        ids = [h.item.id for h in hits]
        if ids:
            await in_thread(self._index, call, ids)
            await record(
                "memory_injected",
                f"{len(ids)} memory item(s) injected for {args.query[:120]!r}",
                memory_ids=join_ids(ids),
                session=call.session,
                turn=call.turn,
            )
        out: dict[str, Any] = {"query": args.query, "fragments": [_hit(h) for h in hits], "count": len(hits)}
        if withheld:
            out["withheld"] = withheld
        return out

    def _index(self, call: Any, ids: list[str]) -> None:
        with self.memory.db.write() as conn:
            self.memory.add_provenance(conn, call, [(i, "injected", "") for i in ids], now_ms())
