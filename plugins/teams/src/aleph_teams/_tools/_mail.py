"""Mail tools: message_send, inbox_read, plans and the member life cycle (idle, shutdown)."""

from __future__ import annotations

import re
import time
from typing import Any, Literal

from pydantic import Field

from aleph import ToolArgs, ToolFacts
from aleph_teams._store import StoreError
from aleph_teams._tools._base import TeamsTool, caller, drop_empty, refs

__all__ = [
    "InboxReadTool",
    "LifecycleIdleTool",
    "LifecycleRequestShutdownTool",
    "LifecycleResolveShutdownTool",
    "MessageSendTool",
    "PlanResolveTool",
    "PlanSubmitTool",
    "parse_mentions",
]

_FENCE = re.compile(r"```.*?(```|$)", re.S)
_SPAN = re.compile(r"`[^`\n]*`")
_MENTION = re.compile(r"(?<![\w@])@([a-z0-9_-]{1,64})(?![\w-])")


def parse_mentions(content: str) -> list[str]:
    """@mentions outside code blocks and code spans, in order, without duplicates."""
    text = _SPAN.sub(" ", _FENCE.sub(" ", content))
    return list(dict.fromkeys(_MENTION.findall(text)))


def _message_view(m: dict[str, Any]) -> dict[str, Any]:
    return drop_empty(
        {
            "id": m["id"],
            "team_id": m["team_id"],
            "from_agent": m["from_agent"],
            "msg_type": m["msg_type"],
            "subject": m["subject"],
            "content": m["content"],
            "reply_to": m["reply_to"],
            "thread_id": m["thread_id"],
            "attachments": m["attachments"],
            "created_at": m["created_at"],
            "role": m.get("role"),
        }
    )


class MessageSendArgs(ToolArgs):
    team_id: str = Field(max_length=100)
    """The team."""
    to: list[str] = Field(max_length=200)
    """Recipients (members' agent names); may be empty when cc, an @mention or broadcast names someone."""
    cc: list[str] = Field(default_factory=list, max_length=200)
    """Copied recipients."""
    msg_type: str = Field(default="message", min_length=1, max_length=64, pattern=r"^[a-z0-9_]+$")
    """message, or a type such as plan_approval_request, idle, shutdown_request."""
    subject: str = Field(max_length=1000)
    """Subject line."""
    content: str = Field(max_length=200_000)
    """Body; @name mentions of members add them as recipients, @all / @everyone broadcasts."""
    reply_to: str | None = Field(default=None, max_length=100)
    """The message this answers (the reply joins its thread)."""
    attachments: list[str] = Field(default_factory=list, max_length=50)
    """Ids of artifacts or other references."""
    broadcast: bool = False
    """Send to every member except you."""


class MessageSendTool(TeamsTool[MessageSendArgs]):
    NAME = "message_send"
    DESCRIPTION = (
        "Send a message to team members' inboxes (to / cc, @mentions, or broadcast to all). Delivery is durable and "
        "ordered per sender; a reply_to joins the parent's thread."
    )
    Args = MessageSendArgs
    FACTS = ToolFacts(tags=("teams",))

    async def call(self, args: MessageSendArgs) -> dict[str, Any]:
        sender = caller()
        team = self.team_for(args.team_id, sender)
        members = [m["agent_id"] for m in team["members"]]
        mentions = parse_mentions(args.content)
        if args.broadcast or "all" in mentions or "everyone" in mentions:
            to = [m for m in members if m != sender]
            cc: list[str] = []
        else:
            unknown = [a for a in [*args.to, *args.cc] if a not in members]
            if unknown:
                raise self.fail(f"not members of team '{team['id']}': {', '.join(unknown[:10])}")
            to = list(dict.fromkeys(args.to))
            to += [m for m in mentions if m in members and m != sender and m not in to]
            cc = [c for c in dict.fromkeys(args.cc) if c not in to]
        recipients = [(a, "to") for a in to] + [(a, "cc") for a in cc]
        try:
            sent = self.store.send_message(
                team_id=team["id"],
                from_agent=sender,
                recipients=recipients,
                subject=args.subject,
                content=args.content,
                msg_type=args.msg_type,
                reply_to=args.reply_to,
                attachments=args.attachments,
            )
        except StoreError as exc:
            raise self.store_error(exc) from None
        refs(message_id=sent["message_id"])
        return drop_empty(
            {
                "message_id": sent["message_id"],
                "thread_id": sent["thread_id"],
                "message": f"Message '{args.subject}' sent successfully",
            }
        )


class InboxReadArgs(ToolArgs):
    team_id: str = Field(max_length=100)
    """The team."""
    mode: Literal["inbox", "thread"] = "inbox"
    """inbox: your unread messages; thread: every message of one thread."""
    thread_id: str | None = Field(default=None, max_length=100)
    """The thread (required for mode=thread)."""
    msg_type: str | None = Field(default=None, max_length=64)
    """Only messages of this type."""
    mark_read: bool = True
    """Mark what is returned as read."""
    peek: bool = False
    """Look without marking anything read (wins over mark_read)."""
    count_only: bool = False
    """Only count unread messages."""
    limit: int = Field(default=100, ge=1, le=1000)
    """Most messages returned."""
    wait_seconds: float = Field(default=0, ge=0, le=3600)
    """When the inbox is empty, wait up to this long for a message (woken at once when one arrives)."""


class InboxReadTool(TeamsTool[InboxReadArgs]):
    NAME = "inbox_read"
    DESCRIPTION = (
        "Read your team inbox (unread messages, oldest first, marked read unless peek), count unread messages, or "
        "read a whole thread. With wait_seconds it waits for the next message instead of polling."
    )
    Args = InboxReadArgs
    FACTS = ToolFacts(untrusted_output="messages from other agents", tags=("teams",), max_duration_ms=3_700_000)

    async def call(self, args: InboxReadArgs) -> dict[str, Any]:
        me = caller()
        team = self.team_for(args.team_id, me)
        if args.count_only:
            unread = self.store.unread_counts(team["id"], me)
            return {"messages": [], "count": unread["to"] + unread["cc"], "unread": unread}
        if args.mode == "thread":
            if not args.thread_id:
                raise self.invalid("inbox_read: thread_id is required when mode='thread'")
            messages = self.store.thread(team["id"], args.thread_id, me, args.limit)
            return {"messages": [_message_view(m) for m in messages], "count": len(messages)}
        mark = args.mark_read and not args.peek
        wait = min(args.wait_seconds, self.host.config.max_wait_seconds)

        def check() -> list[dict[str, Any]]:
            return self.store.inbox(team["id"], me, msg_type=args.msg_type, mark_read=mark, limit=args.limit)

        messages = check() if wait <= 0 else await self.store.wait_until(check, wait)
        return {"messages": [_message_view(m) for m in messages or []], "count": len(messages or [])}


class PlanSubmitArgs(ToolArgs):
    team_id: str = Field(max_length=100)
    """The team."""
    title: str = Field(min_length=1, max_length=1000)
    """Plan title."""
    content: str = Field(max_length=200_000)
    """The plan (markdown)."""
    task_id: str | None = Field(default=None, max_length=100)
    """The task the plan is for (default: a new "plan-<id>")."""


class PlanSubmitTool(TeamsTool[PlanSubmitArgs]):
    NAME = "plan_submit"
    DESCRIPTION = (
        "Submit a plan to your team leader for approval: it is stored as a plan artifact and sent to the leader."
    )
    Args = PlanSubmitArgs
    FACTS = ToolFacts(tags=("teams",))

    async def call(self, args: PlanSubmitArgs) -> dict[str, Any]:
        me = caller()
        team = self.store.get_team(args.team_id)
        if team is None:
            raise self.fail(f"Team '{args.team_id}' not found")
        refs(team_id=team["id"])
        task_id = args.task_id or f"plan-{int(time.time() * 1000)}"
        try:
            artifact_id = self.store.add_artifact(task_id, me, "plan", args.title, args.content, team_id=team["id"])
        except StoreError as exc:
            raise self.store_error(exc) from None
        sent = self.store.send_message(
            team_id=team["id"],
            from_agent=me,
            recipients=[(team["leader_id"], "to")],
            subject=f"Plan approval: {args.title}",
            msg_type="plan_approval_request",
            content=f"Please review and approve/reject the plan.\nTask: {task_id}\nArtifact: {artifact_id}",
            attachments=[artifact_id],
        )
        self.store.log_event(team["id"], "plan_submitted", me, {"artifact_id": artifact_id, "task_id": task_id})
        return {
            "artifact_id": artifact_id,
            "plan_message_id": sent["message_id"],
            "message": f"Plan '{args.title}' submitted to leader '{team['leader_id']}' for approval",
        }


def _decision(tool: TeamsTool[Any], raw: str) -> bool:
    value = raw.strip().lower()
    if value in ("approve", "approved"):
        return True
    if value in ("reject", "rejected"):
        return False
    raise tool.invalid(f"Invalid decision '{raw[:40]}': expected 'approve' or 'reject'")


class PlanResolveArgs(ToolArgs):
    team_id: str = Field(max_length=100)
    """The team."""
    plan_message_id: str = Field(max_length=100)
    """The plan_approval_request message."""
    submitter_agent_id: str = Field(max_length=200)
    """Who submitted the plan."""
    decision: str = Field(max_length=40)
    """approve or reject."""
    feedback: str | None = Field(default=None, max_length=20_000)
    """Feedback (the reason, for a rejection)."""


class PlanResolveTool(TeamsTool[PlanResolveArgs]):
    NAME = "plan_resolve"
    DESCRIPTION = "As team leader, approve or reject a submitted plan; the submitter gets the answer in its thread."
    Args = PlanResolveArgs
    FACTS = ToolFacts(tags=("teams",))

    async def call(self, args: PlanResolveArgs) -> dict[str, Any]:
        approved = _decision(self, args.decision)
        team = self.team_for(args.team_id)
        if team["leader_id"] != caller():
            raise self.fail(f"only the team leader ('{team['leader_id']}') can resolve plans")
        plan = self.store.get_message(team["id"], args.plan_message_id)
        if plan is None or plan["msg_type"] != "plan_approval_request":
            raise self.fail(f"plan message '{args.plan_message_id}' not found in team '{team['id']}'")
        if plan["from_agent"] != args.submitter_agent_id:
            raise self.fail(
                f"plan message '{args.plan_message_id}' was submitted by '{plan['from_agent']}', not "
                f"'{args.submitter_agent_id}'"
            )
        if approved:
            content = "Plan approved." + (f"\n\nFeedback: {args.feedback}" if args.feedback else "")
        else:
            content = args.feedback or "(no reason given)"
        sent = self.store.send_message(
            team_id=team["id"],
            from_agent=caller(),
            recipients=[(args.submitter_agent_id, "to")],
            subject=f"Plan {'approved' if approved else 'rejected'}",
            content=content,
            msg_type="plan_approved" if approved else "plan_rejected",
            reply_to=args.plan_message_id,
        )
        resolution = "approved" if approved else "rejected"
        self.store.log_event(team["id"], "plan_resolved", caller(), {"resolution": resolution})
        return {"resolution": resolution, "message_id": sent["message_id"]}


class LifecycleIdleArgs(ToolArgs):
    team_id: str = Field(max_length=100)
    """The team."""
    summary: str = Field(default="ready for next task", max_length=10_000)
    """What you finished / that you are ready."""
    last_task_id: str | None = Field(default=None, max_length=100)
    """The task you last worked on."""


class LifecycleIdleTool(TeamsTool[LifecycleIdleArgs]):
    NAME = "lifecycle_idle"
    DESCRIPTION = "Tell your team leader you are idle and ready for the next task (a no-op for the leader itself)."
    Args = LifecycleIdleArgs
    FACTS = ToolFacts(tags=("teams",))

    async def call(self, args: LifecycleIdleArgs) -> dict[str, Any]:
        me = caller()
        team = self.team_for(args.team_id, me)
        leader = team["leader_id"]
        if me == leader:
            return {"message_id": None, "message": "Caller is the team leader; idle signal is a no-op"}
        summary = args.summary.strip() or "ready for next task"
        sent = self.store.send_message(
            team_id=team["id"],
            from_agent=me,
            recipients=[(leader, "to")],
            msg_type="idle",
            subject=f"Idle: {summary}",
            content=f"Worker `{me}` is idle.\n\nLast task: {args.last_task_id or '(none)'}\n\n{summary}",
        )
        return {"message_id": sent["message_id"], "message": f"Idle signal sent to leader `{leader}`"}


class LifecycleRequestShutdownArgs(ToolArgs):
    team_id: str = Field(max_length=100)
    """The team."""
    reason: str = Field(max_length=10_000)
    """Why you want to stop."""


class LifecycleRequestShutdownTool(TeamsTool[LifecycleRequestShutdownArgs]):
    NAME = "lifecycle_request_shutdown"
    DESCRIPTION = "Ask your team leader to let you shut down; keep working until it is approved."
    Args = LifecycleRequestShutdownArgs
    FACTS = ToolFacts(tags=("teams",))

    async def call(self, args: LifecycleRequestShutdownArgs) -> dict[str, Any]:
        reason = args.reason.strip()
        if not reason:
            raise self.invalid("lifecycle_request_shutdown: `reason` cannot be empty")
        me = caller()
        team = self.team_for(args.team_id, me)
        if me == team["leader_id"]:
            raise self.fail(
                "lifecycle_request_shutdown: caller is the team leader; a leader cannot request its own shutdown "
                "via the team mailbox"
            )
        sent = self.store.send_message(
            team_id=team["id"],
            from_agent=me,
            recipients=[(team["leader_id"], "to")],
            msg_type="shutdown_request",
            subject=f"Shutdown request: {me}",
            content=f"Worker `{me}` requests shutdown.\n\nReason:\n{reason}",
        )
        return {"message_id": sent["message_id"], "message": f"Shutdown request sent to leader `{team['leader_id']}`"}


class LifecycleResolveShutdownArgs(ToolArgs):
    team_id: str = Field(max_length=100)
    """The team."""
    shutdown_request_id: str = Field(max_length=100)
    """The shutdown_request message."""
    requester_agent_id: str = Field(max_length=200)
    """Who asked."""
    decision: str = Field(max_length=40)
    """approve or reject."""
    feedback: str | None = Field(default=None, max_length=10_000)
    """What to tell the requester."""


class LifecycleResolveShutdownTool(TeamsTool[LifecycleResolveShutdownArgs]):
    NAME = "lifecycle_resolve_shutdown"
    DESCRIPTION = "Approve or reject a member's shutdown request; the answer goes to its thread."
    Args = LifecycleResolveShutdownArgs
    FACTS = ToolFacts(tags=("teams",))

    async def call(self, args: LifecycleResolveShutdownArgs) -> dict[str, Any]:
        approved = _decision(self, args.decision)
        team = self.team_for(args.team_id)
        if team["leader_id"] != caller():
            raise self.fail(f"only the team leader ('{team['leader_id']}') can resolve shutdown requests")
        request = self.store.get_message(team["id"], args.shutdown_request_id)
        if request is None or request["msg_type"] != "shutdown_request":
            raise self.fail(f"shutdown request '{args.shutdown_request_id}' not found in team '{team['id']}'")
        if request["from_agent"] != args.requester_agent_id:
            raise self.fail(
                f"shutdown request '{args.shutdown_request_id}' came from '{request['from_agent']}', not "
                f"'{args.requester_agent_id}'"
            )
        word = "approved" if approved else "rejected"
        sent = self.store.send_message(
            team_id=team["id"],
            from_agent=caller(),
            recipients=[(args.requester_agent_id, "to")],
            msg_type=f"shutdown_{word}",
            subject=f"Shutdown {word}: {args.requester_agent_id}",
            content=args.feedback or f"Shutdown {word}.",
            reply_to=args.shutdown_request_id,
        )
        return {"resolution": word, "message_id": sent["message_id"]}
