"""remember, memory_trace, flag_user_correction and user_profile."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

import aleph
from aleph_memory._base import FamilyTool, in_thread
from aleph_memory._guard import redact_pii
from aleph_memory._items import NewItem, iso
from aleph_memory._memory import Op, Rejected, WriteOutcome
from aleph_memory._provenance import annotate, call_info, join_ids, ledger_refs

__all__ = ["FlagCorrectionTool", "MemoryTraceTool", "RememberTool", "UserProfileTool"]

WRITE = aleph.ToolFacts(idempotent=False, concurrent_safe=False, max_duration_ms=60_000, tags=("memory",))
READ = aleph.ToolFacts(idempotent=True, concurrent_safe=True, max_duration_ms=30_000, tags=("memory",))
MAX_BATCH = 100


class Operation(aleph.ToolArgs):
    action: Literal["add", "replace", "remove"]
    """What to do."""
    content: str | None = Field(default=None, max_length=100_000)
    """The fact to store (add, replace)."""
    old_text: str | None = Field(default=None, max_length=100_000)
    """A unique substring of the fact to change (replace, remove)."""
    subject: str | None = Field(default=None, max_length=256)
    """What the fact is about (e.g. ``user.employer``); a newer fact about the same subject supersedes the older."""


class RememberArgs(aleph.ToolArgs):
    action: Literal["add", "replace", "remove", "batch"]
    """``add`` a fact, ``replace`` one (the old version is kept as history), ``remove`` one (kept, marked
    forgotten), or a ``batch`` of operations applied all-or-nothing."""
    content: str | None = Field(default=None, max_length=100_000)
    """The fact to store (add, replace): one self-contained statement."""
    old_text: str | None = Field(default=None, max_length=100_000)
    """A unique substring of the fact to change (replace, remove)."""
    subject: str | None = Field(default=None, max_length=256)
    """What the fact is about (e.g. ``user.employer``); a newer fact about the same subject supersedes the older."""
    operations: list[Operation] | None = Field(default=None, max_length=MAX_BATCH)
    """For ``batch``: the operations, applied in order; if any fails, none is applied."""


class RememberTool(FamilyTool):
    NAME = "remember"
    DESCRIPTION = (
        "Save, correct or forget a durable fact about the user or the work (preferences, decisions, names)."
        " A newer fact about the same subject supersedes the older one, which is kept as history. Refusals"
        " start with 'rejected:' and change nothing."
    )
    Args = RememberArgs
    FACTS = WRITE

    async def call(self, args: RememberArgs) -> dict[str, Any]:
        call = call_info(self.NAME)
        if args.action == "batch":
            ops = [Op(o.action, o.content, o.old_text, o.subject) for o in args.operations or []]
            if not ops:
                return self._rejected(call, "batch", "batch contains no operations — pass operations", "empty")
        else:
            if args.operations:
                raise aleph.ValidationFailed(self.NAME, "operations: only allowed with action 'batch'")
            ops = [Op(args.action, args.content, args.old_text, args.subject)]
        try:
            outcome = await in_thread(self.memory.remember, call, ops, atomic_batch=args.action == "batch")
        except Rejected as exc:
            return self._rejected(call, args.action, exc.reason, exc.code, args.content or args.old_text or "")
        written_ids = [i.id for i in outcome.written]
        annotate(
            memory_id=written_ids[0] if len(written_ids) == 1 else None,
            memory_ids=join_ids(written_ids) if len(written_ids) > 1 else None,
            supersedes=join_ids([old.id for old, _ in outcome.superseded]) or None,
            forgets=join_ids([i.id for i in outcome.forgotten]) or None,
            source_session=call.session,
            source_turn=call.turn,
            source_call=call.call_id,
        )
        self.memory.rejection_streak(_key(call), landed=True)
        await in_thread(self.memory.decide, call.agent, args.action, "written", args.content or args.old_text or "")
        return self._landed(call.agent, args.action, outcome, len(ops))

    def _landed(self, agent: str, action: str, outcome: WriteOutcome, count: int) -> dict[str, Any]:
        message = {
            "add": "Entry added.",
            "replace": "Entry replaced.",
            "remove": "Entry removed.",
        }.get(action, f"Applied {count} operation(s).")
        if outcome.skipped_duplicates:
            message += f" {outcome.skipped_duplicates} duplicate add(s) skipped."
        used = self.memory.items.count_active(agent)
        limit = self.memory.config.max_facts
        out: dict[str, Any] = {
            "written": True,
            "message": message + " Write saved — do not repeat this write.",
            "entries": [i.to_json() for i in outcome.written],
            "entry_count": used,
            "usage": f"{used * 100 // limit}% — {used}/{limit} facts",
            "usage_pct": used * 100 // limit,
            "destination": "long-term memory (searchable with memory_search; history kept in memory_timeline)",
        }
        if outcome.superseded:
            out["superseded"] = [
                {"id": old.id, "content": old.content, "by": new.id} for old, new in outcome.superseded
            ]
        if outcome.forgotten:
            out["forgotten"] = [{"id": i.id, "content": i.content} for i in outcome.forgotten]
        return out

    def _rejected(self, call: Any, action: str, reason: str, code: str, subject: str = "") -> dict[str, Any]:
        streak = self.memory.rejection_streak(_key(call), landed=False)
        exhausted = streak > 3
        self.memory.decide(call.agent, action, "retry_cap_reached" if exhausted else code, subject)
        annotate(decision="rejected", reason=code)
        message = f"rejected: {reason}"
        if exhausted:
            message += (
                " Stop retrying memory calls — leave memory unchanged and continue your reply; the fact can be"
                " saved in a later turn."
            )
        used = self.memory.items.count_active(call.agent)
        limit = self.memory.config.max_facts
        out: dict[str, Any] = {
            "written": False,
            "message": message,
            "entry_count": used,
            "usage": f"{used * 100 // limit}% — {used}/{limit} facts",
            "usage_pct": used * 100 // limit,
        }
        if exhausted:
            out["retry_exhausted"] = True
        return out


def _key(call: Any) -> str:
    return call.turn or call.session or "__no_turn__"


class TraceArgs(aleph.ToolArgs):
    target: str = Field(default="", max_length=256)
    """A memory id (kind ``memory``), a session key (kind ``session``), or a substring of the write-decision
    subjects (kind ``write_decision``; empty = the newest)."""
    kind: Literal["memory", "session", "write_decision"] = "memory"
    """What ``target`` names."""
    max_results: int = Field(default=50, ge=1, le=500)
    """Events (or decisions) returned at most."""


class MemoryTraceTool(FamilyTool):
    NAME = "memory_trace"
    DESCRIPTION = (
        "Trace memory provenance: where a fact came from (session, turn, call), every change to it, and"
        " which turns it was injected into, each checked against the signed ledger. Also traces a whole"
        " session's memory events, or lists remember's write decisions."
    )
    Args = TraceArgs
    FACTS = READ

    async def call(self, args: TraceArgs) -> dict[str, Any]:
        call = call_info(self.NAME)
        if args.kind == "write_decision":
            rows = await in_thread(self.memory.decisions, call.agent, args.target, args.max_results)
            return {"target": args.target, "write_decisions": [{**r, "at": iso(r["at"])} for r in rows]}
        if not args.target:
            raise aleph.ValidationFailed(self.NAME, f"target: required for kind {args.kind!r}")
        ledger = await in_thread(self._ledger_index, call.agent)
        if args.kind == "session":
            return await in_thread(self._session, args.target, call.agent, args.max_results, ledger)
        versions = await in_thread(self.memory.items.history, args.target, owner=call.agent)
        if not versions:
            raise aleph.ExecutionFailed(
                self.NAME, f"no memory item with id {args.target!r}; find ids with memory_search"
            )
        out_versions = []
        injected: list[dict[str, Any]] = []
        for version in versions:
            events: list[dict[str, Any]] = []
            for event in await in_thread(self.memory.provenance, version.id, owner=call.agent, limit=args.max_results):
                event["at"] = iso(event["at"])
                event["ledger"] = _confirm(ledger, version.id, event)
                (injected if event["event"] == "injected" else events).append(event)
            entry = version.to_json(full=True)
            entry["origin"] = {"session": version.session, "turn": version.source_turn, "call_id": version.source_call}
            entry["events"] = events
            out_versions.append(entry)
        return {
            "target": args.target,
            "versions": out_versions,
            "injected_into": injected[: args.max_results],
            "ledger_checked": ledger is not None,
        }

    def _session(self, session: str, owner: str, limit: int, ledger: Any) -> dict[str, Any]:
        events = []
        for event in self.memory.session_events(session, owner=owner, limit=limit):
            event["ledger"] = _confirm(ledger, event["memory_id"], event)
            event["at"] = iso(event["at"])
            events.append(event)
        return {"target": session, "events": events, "ledger_checked": ledger is not None}

    def _ledger_index(self, agent: str) -> dict[str, list[dict[str, Any]]] | None:
        ledger = self.rt.ledger
        if ledger is None:
            return None
        try:
            ledger.flush_sync(timeout=5.0)  # rows of calls that just returned may still be queued
            rows = ledger.rows(agent, limit=50_000)
        except Exception:
            return None
        index: dict[str, list[dict[str, Any]]] = {}
        for row in rows:
            refs = ledger_refs(row)
            for key, role in _ROLES.items():
                for memory_id in (x for x in refs.get(key, "").split(",") if x):
                    index.setdefault(memory_id, []).append(
                        {
                            "role": role,
                            "seq": row.seq,
                            "hash": row.hash,
                            "action": row.action,
                            "tool": row.target,
                            "refs": refs,
                        }
                    )
        return index


_ROLES = {
    "memory_id": "written",
    "memory_ids": "written",
    "supersedes": "superseded",
    "forgets": "forgotten",
}
_EVENT_ROLE = {
    "remembered": "written",
    "superseding": "written",
    "corrected": "written",
    "completed": "written",
    "compacted": "written",
    "ingested": "written",
    "superseded": "superseded",
    "forgotten": "forgotten",
    "injected": "injected",
}


def _confirm(ledger: dict[str, list[dict[str, Any]]] | None, memory_id: str, event: dict[str, Any]) -> Any:
    """The signed ledger row that vouches for ``event`` (its seq and hash), or None when none does."""
    if ledger is None:
        return None
    role = _EVENT_ROLE.get(event["event"])
    for row in ledger.get(memory_id, []):
        refs = row["refs"]
        injected = refs.get("event") == "memory_injected"
        if (role == "injected") != injected or (not injected and row["role"] != role):
            continue
        call = refs.get("source_call") or refs.get("call")
        if event.get("call_id") and call and call != event["call_id"]:
            continue
        if injected and event.get("turn") and refs.get("turn") not in (None, event["turn"]):
            continue
        return {"seq": row["seq"], "hash": row["hash"], "action": row["action"], "tool": row["tool"]}
    return None


class CorrectionArgs(aleph.ToolArgs):
    content: str = Field(min_length=1, max_length=10_000)
    """What the user corrected, in their words or a faithful paraphrase."""
    severity: Literal["low", "med", "high", "critical"]
    """How much the mistake mattered."""
    suggested_rule: str | None = Field(default=None, max_length=2_000)
    """A rule that would avoid the mistake next time."""


class FlagCorrectionTool(FamilyTool):
    NAME = "flag_user_correction"
    DESCRIPTION = (
        "Log that the user corrected you, for later review and distillation into lasting guidance. Do not"
        " announce it to the user; just continue."
    )
    Args = CorrectionArgs
    FACTS = WRITE

    async def call(self, args: CorrectionArgs) -> dict[str, Any]:
        call = call_info(self.NAME)
        try:
            content = self.memory.check_content(args.content)
        except Rejected as exc:
            raise aleph.ValidationFailed(self.NAME, f"content: {exc.reason}") from None
        extra: dict[str, str] = {"severity": args.severity}
        if args.suggested_rule:
            extra["suggested_rule"] = args.suggested_rule
        stored = await in_thread(self.memory.store, call, [NewItem(content, "correction", extra=extra)], "corrected")
        annotate(memory_id=stored[0].id, source_session=call.session, source_turn=call.turn, source_call=call.call_id)
        await in_thread(self.memory.decide, call.agent, "flag_correction", "written", content)
        return {"success": True, "message": "Correction logged.", "raw_memory_id": stored[0].id}


class ProfileArgs(aleph.ToolArgs):
    action: Literal["read", "history"] = "read"
    """``read``: the current profile; ``history``: every change to it, oldest first."""


class UserProfileTool(FamilyTool):
    NAME = "user_profile"
    DESCRIPTION = (
        "Read what memory holds about the user: the current facts whose subject starts with 'user' (personal"
        " details redacted), or their history of changes."
    )
    Args = ProfileArgs
    FACTS = READ

    async def call(self, args: ProfileArgs) -> dict[str, Any]:
        call = call_info(self.NAME)
        with self.memory.db.read() as conn:
            rows = conn.execute(
                "SELECT id, subject, content, status, valid_from, valid_to FROM items WHERE agent = ? AND kind = 'fact'"
                " AND (subject = 'user' OR subject LIKE 'user.%' ESCAPE '\\') ORDER BY rowid LIMIT 5000",
                (call.agent,),
            ).fetchall()
        current = [r for r in rows if r[3] == "active"]
        revision = len(rows) + sum(1 for r in rows if r[5] is not None)
        if args.action == "history":
            return {
                "revision": revision,
                "history": [
                    {
                        "id": r[0],
                        "subject": r[1],
                        "content": redact_pii(r[2]),
                        "status": r[3],
                        "valid_from": iso(r[4]),
                        "valid_to": iso(r[5]),
                    }
                    for r in rows
                ],
            }
        if not current:
            return {"content": None, "revision": revision or None, "facts": []}
        lines = [f"- {r[1]}: {redact_pii(r[2])}" for r in current]
        return {
            "content": "\n".join(lines),
            "revision": revision,
            "facts": [{"id": r[0], "subject": r[1], "content": redact_pii(r[2])} for r in current],
        }
