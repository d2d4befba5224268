"""session_list, session_new, session_rename, session_send, session_search, session_compact, session_complete."""

from __future__ import annotations

import inspect
from typing import Any

from pydantic import Field

import aleph
from aleph_memory._base import FamilyTool, in_thread
from aleph_memory._items import NewItem, now_ms
from aleph_memory._provenance import CallInfo, annotate, call_info, owns_session
from aleph_memory._sessions import KEY, ForeignSession, SessionStore, extract

__all__ = [
    "SessionCompactTool",
    "SessionCompleteTool",
    "SessionListTool",
    "SessionNewTool",
    "SessionRenameTool",
    "SessionSearchTool",
    "SessionSendTool",
]

READ = aleph.ToolFacts(idempotent=True, concurrent_safe=True, max_duration_ms=30_000, tags=("sessions",))
WRITE = aleph.ToolFacts(idempotent=False, max_duration_ms=60_000, tags=("sessions",))
KEEP_RECENT = 6


class SessionTool(FamilyTool):
    """A tool over sessions."""

    @property
    def sessions(self) -> SessionStore:
        """The session store."""
        store: SessionStore = self.rt.sessions
        return store

    def need_session(self) -> CallInfo:
        """The call, which must belong to a session of the calling agent's own."""
        call = call_info(self.NAME)
        if not call.session:
            raise aleph.ExecutionFailed(
                self.NAME, f"{self.NAME}: no session context available (this call has no session key)"
            )
        return call

    async def own(self, fn: Any, key: str, *args: Any, **kwargs: Any) -> Any:
        """Run a write to session ``key`` in a worker thread; another agent's session is refused, nothing changed.

        Core's binding of sessions to agents decides first; the family's own table (sessions a host
        wrote through :class:`~aleph_memory.MemoryStore`) must agree.
        """
        try:
            if not owns_session(key, claim=True):
                raise ForeignSession(key)
            return await in_thread(fn, key, *args, **kwargs)
        except ForeignSession as exc:
            raise aleph.PermissionDenied(
                self.NAME, f"{exc}: a session is opened, renamed, compacted or closed only by the agent it belongs to"
            ) from None


class ListArgs(aleph.ToolArgs):
    limit: int = Field(default=50, ge=1, le=500)
    """Sessions returned at most."""
    active_minutes: int | None = Field(default=None, ge=1, le=525_600)
    """Only sessions active within this many minutes."""
    message_limit: int = Field(default=0, ge=0, le=20)
    """Also return each session's last messages (0 = none)."""


class SessionListTool(SessionTool):
    NAME = "session_list"
    DESCRIPTION = (
        "List this agent's sessions, most recently active first, with topic, message count, queued messages and"
        " state (closed, completed); optionally their last messages."
    )
    Args = ListArgs
    FACTS = READ

    async def call(self, args: ListArgs) -> dict[str, Any]:
        call = call_info(self.NAME)
        if call.session:
            await self.own(self.sessions.touch, call.session, call.agent)
        since = now_ms() - args.active_minutes * 60_000 if args.active_minutes else None
        rows = await in_thread(self.sessions.list_sessions, agent=call.agent, active_since=since, limit=args.limit)
        if args.message_limit:
            for row in rows:
                msgs = await in_thread(self.sessions.messages, row["key"], owner=call.agent, include_compacted=True)
                row["messages"] = [{"role": m.role, "content": m.content[:500]} for m in msgs[-args.message_limit :]]
        return {"count": len(rows), "sessions": rows}


class NewArgs(aleph.ToolArgs):
    topic: str | None = Field(default=None, max_length=200)
    """A topic to file the closing conversation under."""


class SessionNewTool(SessionTool):
    NAME = "session_new"
    DESCRIPTION = (
        "Start a new conversation: close the current session (optionally naming its topic) and open the next"
        " one. Memory and notes carry over; the transcript starts empty."
    )
    Args = NewArgs
    FACTS = WRITE

    async def call(self, args: NewArgs) -> dict[str, Any]:
        call = self.need_session()
        assert call.session is not None
        topic = " ".join(args.topic.split())[:100] if args.topic and args.topic.strip() else None
        new = await self.own(self.sessions.new_epoch, call.session, call.agent, topic)
        annotate(session=call.session, new_session=new)
        return {
            "old_session_key": call.session,
            "new_session_key": new,
            "topic": topic,
            "message": "A new conversation has started" + (f" ({topic})" if topic else "") + ".",
        }


class RenameArgs(aleph.ToolArgs):
    topic: str = Field(min_length=1, max_length=1000)
    """The session's new topic (trimmed, at most 100 characters kept)."""


class SessionRenameTool(SessionTool):
    NAME = "session_rename"
    DESCRIPTION = "Set the topic of the current session (what session_list shows for it)."
    Args = RenameArgs
    FACTS = WRITE

    async def call(self, args: RenameArgs) -> dict[str, Any]:
        call = self.need_session()
        assert call.session is not None
        topic = " ".join(args.topic.split())[:100]
        if not topic:
            raise aleph.ValidationFailed(self.NAME, "topic: cannot be empty")
        await self.own(self.sessions.rename, call.session, call.agent, topic)
        annotate(session=call.session)
        return {"session_key": call.session, "topic": topic, "message": f"Session topic updated to: {topic}"}


class SendArgs(aleph.ToolArgs):
    session_key: str = Field(min_length=1, max_length=200)
    """The session to send to (as session_list shows it)."""
    message: str = Field(min_length=1, max_length=100_000)
    """What to tell it."""


class SessionSendTool(SessionTool):
    NAME = "session_send"
    DESCRIPTION = (
        "Send a message to another session's queue; its agent receives it when that session next runs. Returns"
        " the queued message id (this does not wait for a reply)."
    )
    Args = SendArgs
    FACTS = WRITE

    async def call(self, args: SendArgs) -> dict[str, Any]:
        call = call_info(self.NAME)
        if KEY.fullmatch(args.session_key) is None:
            raise aleph.ValidationFailed(self.NAME, f"session_key: invalid session key {args.session_key!r}")
        target = await in_thread(self.sessions.get, args.session_key, owner=call.agent)
        if target is not None and not owns_session(args.session_key, claim=True):
            target = None
        if target is None:  # another agent's session answers like a missing key
            raise aleph.ExecutionFailed(
                self.NAME,
                f"No session found for key {args.session_key!r}; session_list shows the sessions you can reach",
            )
        if args.session_key == call.session:
            raise aleph.ValidationFailed(self.NAME, "session_key: is the current session; send to another one")
        message_id = await in_thread(
            self.sessions.send, args.session_key, args.message, sender_session=call.session, sender_agent=call.agent
        )
        annotate(session=args.session_key, message_id=message_id)
        return {"run_id": message_id, "status": "accepted", "session_key": args.session_key}


class SearchArgs(aleph.ToolArgs):
    query: str = Field(min_length=1, max_length=2000)
    """What was said or done."""
    max_results: int = Field(default=5, ge=1, le=50)
    """Sessions returned at most."""


class SessionSearchTool(SessionTool):
    NAME = "session_search"
    DESCRIPTION = (
        "Search across this agent's past sessions: their transcripts, compacted summaries and topics. Returns the"
        " best sessions with quotes of the matching messages."
    )
    Args = SearchArgs
    FACTS = READ

    async def call(self, args: SearchArgs) -> dict[str, Any]:
        call = call_info(self.NAME)
        hits = await in_thread(self.sessions.search, args.query, agent=call.agent, limit=args.max_results * 8)
        chunks = (
            await in_thread(
                self.memory.search, call.agent, args.query, limit=args.max_results * 4, kinds=["chunk", "outcome"]
            )
        ).hits
        by_session: dict[str, dict[str, Any]] = {}
        for hit in chunks:
            if hit.item.session:
                entry = by_session.setdefault(
                    hit.item.session, {"session_key": hit.item.session, "evidence_quotes": [], "score": 0.0}
                )
                entry.setdefault("summary", hit.item.content[:1500])
                entry["source"] = "compaction" if hit.item.kind == "chunk" else "completion"
                entry["score"] = max(entry["score"], hit.score)
        for found in hits:
            entry = by_session.setdefault(
                found["session"], {"session_key": found["session"], "evidence_quotes": [], "score": 0.0}
            )
            if len(entry["evidence_quotes"]) < 2:
                entry["evidence_quotes"].append(f"{found['role']}: {found['content'][:200]}")
            entry["score"] = max(entry["score"], found["score"])
        ranked = sorted(by_session.values(), key=lambda e: -e["score"])[: args.max_results]
        for entry in ranked:
            meta = await in_thread(self.sessions.get, entry["session_key"], owner=call.agent) or {}
            entry["topic"] = meta.get("topic")
            entry["timestamp"] = meta.get("updated_at")
            entry.setdefault("summary", None)
            entry["score"] = round(entry["score"], 4)
        return {"query": args.query, "hits": ranked, "total_hits": len(by_session)}


class CompactArgs(aleph.ToolArgs):
    instructions: str | None = Field(default=None, max_length=4000)
    """What the summary should keep (decisions, open questions, names)."""
    extractive: bool = False
    """Without a summariser, keep an extract of the most informative sentences instead (marked as an extract)."""


class SessionCompactTool(SessionTool):
    NAME = "session_compact"
    DESCRIPTION = (
        "Compact this session's transcript: fold the older messages into a summary kept in memory (recall_context"
        " brings it back) and keep the most recent messages verbatim. Needs a summariser."
    )
    Args = CompactArgs
    FACTS = WRITE

    async def call(self, args: CompactArgs) -> dict[str, Any]:
        call = self.need_session()
        assert call.session is not None
        await self.own(self.sessions.touch, call.session, call.agent)
        messages = await in_thread(self.sessions.messages, call.session, owner=call.agent)
        older = messages[:-KEEP_RECENT]
        if len(older) < 2:
            return {
                "compacted": 0,
                "kept": len(messages),
                "tokens_saved": 0,
                "message": f"Nothing to compact — {len(messages)} message(s), the last {KEEP_RECENT} are always kept.",
            }
        texts = [f"{m.role}: {m.content}" for m in older]
        try:
            summarise = self.memory.providers.summariser(self.NAME)
        except aleph.ExecutionFailed:
            if not args.extractive:
                raise
            summary, how = extract(texts), "extract"
        else:
            answer = summarise(texts, args.instructions)
            summary, how = str(await answer if inspect.isawaitable(answer) else answer), "summary"
        if not summary.strip():
            return {
                "compacted": 0,
                "kept": len(messages),
                "tokens_saved": 0,
                "message": "Nothing to compact — the summary is empty.",
            }
        noun = "a summary" if how == "summary" else "an extract"
        label = "Summary" if how == "summary" else "Extract (selected sentences, not a summary)"
        content = f"{label} of {len(older)} earlier message(s):\n{summary}"
        stored = await in_thread(
            self.memory.store, call, [NewItem(content, "chunk", session=call.session, extra={"how": how})], "compacted"
        )
        await in_thread(self.sessions.mark_compacted, [m.rowid for m in older])
        before = sum(len(t) for t in texts) // 4
        saved = max(0, before - len(content) // 4)
        annotate(memory_id=stored[0].id, session=call.session)
        return {
            "compacted": len(older),
            "kept": len(messages) - len(older),
            "tokens_saved": saved,
            "memory_id": stored[0].id,
            "kind": how,
            "message": f"Compacted {len(older)} earlier message(s) into {noun};"
            f" kept the {len(messages) - len(older)} most recent verbatim (~{saved} tokens freed per turn).",
        }


class CompleteArgs(aleph.ToolArgs):
    outcome: str = Field(min_length=1, max_length=20_000)
    """What was done and how it ended."""
    key_learnings: list[str] | None = Field(default=None, max_length=50)
    """Lessons worth keeping for next time."""


class SessionCompleteTool(SessionTool):
    NAME = "session_complete"
    DESCRIPTION = (
        "Mark the task of this session as done and record its outcome and lessons in memory (the conversation"
        " itself goes on)."
    )
    Args = CompleteArgs
    FACTS = WRITE

    async def call(self, args: CompleteArgs) -> dict[str, Any]:
        call = self.need_session()
        assert call.session is not None
        content = f"TASK_OUTCOME:\n{args.outcome.strip()}\n"
        learnings = [" ".join(x.split()) for x in args.key_learnings or [] if x.strip()]
        if learnings:
            content += "\nKEY_LEARNINGS:\n" + "\n".join(f"- {x}" for x in learnings) + "\n"
        try:
            self.memory.check_content(args.outcome)
        except Exception as exc:
            return {"ok": False, "message": f"Task completion NOT recorded: {exc}"}
        await self.own(self.sessions.touch, call.session, call.agent)  # before anything is stored for it
        stored = await in_thread(
            self.memory.store, call, [NewItem(content, "outcome", session=call.session)], "completed"
        )
        await self.own(self.sessions.complete, call.session, call.agent)
        annotate(memory_id=stored[0].id, session=call.session)
        return {
            "ok": True,
            "memory_id": stored[0].id,
            "message": f"Task completion recorded for session {call.session!r} (searchable with memory_search).",
        }
