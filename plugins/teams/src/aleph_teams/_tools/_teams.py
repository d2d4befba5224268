"""Team tools: create, delegate, status, disband, protocol, members, digest, usage."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

import aleph
from aleph import ToolArgs, ToolFacts
from aleph_teams._store import StoreError
from aleph_teams._tools._base import TeamsTool, caller, drop_empty, refs

__all__ = [
    "BudgetSpec",
    "MemberSpec",
    "TeamCreateTool",
    "TeamDelegateTool",
    "TeamDigestTool",
    "TeamDisbandTool",
    "TeamMemberAddTool",
    "TeamMemberRemoveTool",
    "TeamSetProtocolTool",
    "TeamStatusTool",
    "TeamUsageTool",
    "check_agent_id",
]

_AGENT_ID = re.compile(r"[a-z0-9_-]{1,64}")
_ACP = re.compile(r"acp:[a-z0-9_-]{1,64}(/[A-Za-z0-9_.-]{1,128})?")
MAX_TIMEOUT = 86_400


def check_agent_id(agent_id: str) -> str | None:
    """Why ``agent_id`` is not a valid member id (None when it is): ``[a-z0-9_-]{1,64}`` or ``acp:<harness>[/<s>]``."""
    if _AGENT_ID.fullmatch(agent_id) or _ACP.fullmatch(agent_id):
        return None
    return (
        f"Invalid agent ID '{agent_id[:80]}': use 1-64 of a-z, 0-9, _ and -, or an ACP reference "
        "'acp:<harness>[/<session>]'"
    )


class BudgetSpec(BaseModel):
    """A spend cap: tool calls, wall-clock seconds, tokens, cost (any subset; unset = no cap of its own)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    calls: int | None = Field(default=None, ge=0, le=10_000_000)
    """Most tool calls."""
    wall_seconds: float | None = Field(default=None, ge=0, le=30 * 86_400)
    """Most wall-clock seconds of one run (tasks only)."""
    tokens: int | None = Field(default=None, ge=0, le=10**12)
    """Most model tokens, as the host reports them."""
    cost: float | None = Field(default=None, ge=0, le=10**9)
    """Most cost (in the host's currency), as the host reports it."""

    def as_dict(self) -> dict[str, Any]:
        """Only the caps that are set."""
        return {k: v for k, v in self.model_dump().items() if v is not None}


class MemberSpec(BaseModel):
    """A member to enrol."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    agent_id: str = Field(max_length=200)
    """The member's agent name (its ``[agents.<name>]`` permissions apply to its tool calls)."""
    role: str = Field(default="", max_length=200)
    """Free-form role, e.g. "worker", "reviewer"."""
    runner: str | None = Field(default=None, max_length=100)
    """The agent runner that runs this member (default: ``[teams] default_runner``)."""
    budget: BudgetSpec | None = None
    """The member's budget, reserved from the team's."""


class TeamCreateArgs(ToolArgs):
    name: str = Field(min_length=1, max_length=200)
    """Unique team name."""
    description: str = Field(default="", max_length=10_000)
    """What the team is for."""
    members: list[MemberSpec] = Field(default_factory=list, max_length=200)
    """Members to enrol; the caller becomes the leader."""
    protocol: str | None = Field(default=None, max_length=20_000)
    """Working agreement handed to every member with each task."""
    budget: BudgetSpec | None = None
    """The team's budget; members' and tasks' budgets are reserved out of it."""


class TeamCreateTool(TeamsTool[TeamCreateArgs]):
    NAME = "team_create"
    DESCRIPTION = (
        "Create a team you lead, with members (agent names, each with a role and optionally its own budget and "
        "runner), an optional protocol and a budget. Names are unique. Returns the team id."
    )
    Args = TeamCreateArgs
    FACTS = ToolFacts(tags=("teams",))

    async def call(self, args: TeamCreateArgs) -> dict[str, Any]:
        leader = caller()
        for m in args.members:
            problem = check_agent_id(m.agent_id)
            if problem:
                raise self.invalid(problem)
        members = [
            {
                "agent_id": m.agent_id,
                "role": m.role,
                "runner": m.runner or "",
                "kind": "acp_session" if m.agent_id.startswith("acp:") else "agent",
                "budget": m.budget.as_dict() if m.budget else None,
            }
            for m in args.members
        ]
        await self.consent_to_join(args.name, leader, [m["agent_id"] for m in members if m["agent_id"] != leader])
        try:
            team = self.store.create_team(
                name=args.name,
                description=args.description,
                leader_id=leader,
                members=members,
                protocol=(args.protocol or "").strip() or None,
                budget=args.budget.as_dict() if args.budget else None,
            )
        except StoreError as exc:
            raise self.store_error(exc) from None
        refs(team_id=team["id"])
        enrolled = [m for m in team["members"] if m["agent_id"] != leader]
        return {
            "team_id": team["id"],
            "name": team["name"],
            "leader_id": leader,
            "members": [{"agent_id": m["agent_id"], "role": m["role"]} for m in enrolled],
            "message": f"Team '{team['name']}' created (id: {team['id']}) with {len(enrolled)} member(s).",
        }


class TeamDelegateArgs(ToolArgs):
    team_id: str = Field(max_length=100)
    """The team."""
    agent_id: str = Field(max_length=200)
    """The member to run the task."""
    task: str = Field(min_length=1, max_length=100_000)
    """What to do."""
    timeout_secs: int = Field(default=300, ge=1, le=MAX_TIMEOUT)
    """Wall-clock limit of the run."""
    budget: BudgetSpec | None = None
    """The task's own budget, reserved from the member's (and the team's)."""
    review: bool = False
    """Leave the result in waiting_review for the leader (task_review) instead of completing it."""


class TeamDelegateTool(TeamsTool[TeamDelegateArgs]):
    NAME = "team_delegate"
    DESCRIPTION = (
        "Run one task on a team member now and wait for its reply (up to timeout_secs). The member runs through "
        "its agent runner; its tool calls pass the permission chokepoint under its own agent name and budget."
    )
    Args = TeamDelegateArgs
    FACTS = ToolFacts(tags=("teams",), max_duration_ms=(MAX_TIMEOUT + 60) * 1000)

    async def call(self, args: TeamDelegateArgs) -> dict[str, Any]:
        team = self.team_for(args.team_id)
        member = next((m for m in team["members"] if m["agent_id"] == args.agent_id), None)
        if member is None:
            raise self.fail(f"Agent '{args.agent_id}' is not a member of team '{args.team_id}'")
        self.host.runner_for(member)  # no runner → "agent runner not available", before any task exists
        try:
            task = self.store.create_task(
                subject=args.task,
                team_id=team["id"],
                owner=member["agent_id"],
                budget=args.budget.as_dict() if args.budget else None,
                metadata={"delegated_by": caller()},
            )
        except StoreError as exc:
            raise self.store_error(exc) from None
        refs(task_id=task["id"])
        call = aleph.current_call()
        outer = call.turn.budget if call is not None and call.turn is not None else None
        outcome = await self.host.run_task(
            task["id"], timeout_seconds=args.timeout_secs, review=args.review, outer=outer
        )
        return drop_empty(
            {"task_id": task["id"], "status": outcome.status, "reply": outcome.reply, "error": outcome.error}
        )


class TeamIdArgs(ToolArgs):
    team_id: str = Field(max_length=100)
    """The team."""


class TeamStatusTool(TeamsTool[TeamIdArgs]):
    NAME = "team_status"
    DESCRIPTION = "Show a team you belong to: status, leader, protocol, members and every task with its status."
    Args = TeamIdArgs
    FACTS = ToolFacts(idempotent=True, concurrent_safe=True, tags=("teams",))

    async def call(self, args: TeamIdArgs) -> dict[str, Any]:
        team = self.team_for(args.team_id)
        tasks = self.store.team_tasks(team["id"])
        return drop_empty(
            {
                "team_id": team["id"],
                "name": team["name"],
                "status": team["status"],
                "leader_id": team["leader_id"],
                "protocol": team["protocol"],
                "budget": team["budget"] or None,
                "members": [{"agent_id": m["agent_id"], "role": m["role"]} for m in team["members"]],
                "tasks": [
                    {
                        "id": t["id"],
                        "agent_id": t["owner"] or "",
                        "subject": t["subject"],
                        "status": t["status"],
                        "result": t["result"],
                    }
                    for t in tasks
                ],
            }
        )


class TeamDisbandTool(TeamsTool[TeamIdArgs]):
    NAME = "team_disband"
    DESCRIPTION = (
        "Disband a team (asks for confirmation): it stops accepting work, its unread mail expires and its unfinished "
        "tasks are cancelled. History is kept."
    )
    Args = TeamIdArgs
    FACTS = ToolFacts(requires_approval=True, tags=("teams",))

    async def call(self, args: TeamIdArgs) -> dict[str, Any]:
        team = self.team_for(args.team_id)
        if team["leader_id"] != caller():
            raise self.fail(f"only the team leader ('{team['leader_id']}') can disband the team")
        open_tasks = [t["id"] for t in self.store.team_tasks(team["id"]) if t["stored_status"] == "in_progress"]
        if not self.store.disband(team["id"], caller()):
            raise self.fail(f"Team '{team['id']}' is already disbanded.")
        self.host.cancel_running(open_tasks)
        return {"team_id": team["id"], "message": f"Team '{team['id']}' has been disbanded."}


class TeamSetProtocolArgs(ToolArgs):
    team_id: str = Field(max_length=100)
    """The team."""
    protocol: str | None = Field(default=None, max_length=20_000)
    """The protocol text; omitted or blank clears it."""


class TeamSetProtocolTool(TeamsTool[TeamSetProtocolArgs]):
    NAME = "team_set_protocol"
    DESCRIPTION = "Set or clear a team's protocol: the working agreement every member receives with its next task."
    Args = TeamSetProtocolArgs
    FACTS = ToolFacts(tags=("teams",))

    async def call(self, args: TeamSetProtocolArgs) -> dict[str, Any]:
        team = self.team_for(args.team_id)
        text = (args.protocol or "").strip()
        self.store.set_protocol(team["id"], text or None)
        verb = "set" if text else "cleared"
        return {
            "team_id": team["id"],
            "protocol_set": bool(text),
            "message": f"Protocol {verb} for team '{team['id']}'.",
        }


class TeamMemberAddArgs(ToolArgs):
    team_id: str = Field(max_length=100)
    """The team."""
    agent_id: str = Field(max_length=200)
    """An agent name, or an ACP reference 'acp:<harness>[/<session>]' for an external CLI agent."""
    role: str = Field(default="", max_length=200)
    """Free-form role."""
    runner: str | None = Field(default=None, max_length=100)
    """The runner for this member (default: ``[teams] default_runner``)."""
    budget: BudgetSpec | None = None
    """The member's budget, reserved from the team's."""


class TeamMemberAddTool(TeamsTool[TeamMemberAddArgs]):
    NAME = "team_member_add"
    DESCRIPTION = "Add a member to a team you lead (optionally with its own runner and budget)."
    Args = TeamMemberAddArgs
    FACTS = ToolFacts(tags=("teams",))

    async def call(self, args: TeamMemberAddArgs) -> dict[str, Any]:
        team = self.store.get_team(args.team_id)
        if team is None:
            raise self.fail(f"team not found: {args.team_id}")
        refs(team_id=team["id"])
        if team["leader_id"] != caller():
            raise self.fail(f"only the team leader ('{team['leader_id']}') can add members")
        problem = check_agent_id(args.agent_id)
        if problem:
            raise self.invalid(
                f"agent '{args.agent_id[:80]}' is not a valid agent name and not a valid ACP reference "
                "(use 'acp:<harness>[/<session>]' for external CLI agents)"
            )
        is_acp = args.agent_id.startswith("acp:")
        await self.consent_to_join(team["name"], team["leader_id"], [args.agent_id])
        try:
            self.store.add_member(
                team["id"],
                args.agent_id,
                args.role,
                kind="acp_session" if is_acp else "agent",
                runner=args.runner or "",
                budget=args.budget.as_dict() if args.budget else None,
                actor=caller(),
            )
        except StoreError as exc:
            raise self.store_error(exc) from None
        what = "ACP harness" if is_acp else "agent"
        return {
            "message": f"{what} '{args.agent_id}' has been added to team '{team['id']}'.",
            "agent_id": args.agent_id,
            "team_id": team["id"],
            "is_acp": is_acp,
        }


class TeamMemberRemoveArgs(ToolArgs):
    team_id: str = Field(max_length=100)
    """The team."""
    agent_id: str = Field(max_length=200)
    """The member to remove."""


class TeamMemberRemoveTool(TeamsTool[TeamMemberRemoveArgs]):
    NAME = "team_member_remove"
    DESCRIPTION = "Remove a member from a team you lead (the leader cannot be removed)."
    Args = TeamMemberRemoveArgs
    FACTS = ToolFacts(tags=("teams",))

    async def call(self, args: TeamMemberRemoveArgs) -> dict[str, Any]:
        team = self.store.get_team(args.team_id)
        if team is None:
            raise self.fail(f"team not found: {args.team_id}")
        refs(team_id=team["id"])
        if team["leader_id"] != caller():
            raise self.fail(f"only the team leader ('{team['leader_id']}') can remove members")
        try:
            self.store.remove_member(team["id"], args.agent_id, caller())
        except StoreError as exc:
            raise self.store_error(exc) from None
        return {"message": f"Agent '{args.agent_id}' has been removed from team '{team['id']}'."}


class TeamDigestArgs(ToolArgs):
    team_id: str = Field(max_length=100)
    """The team."""
    hours: int = Field(default=24, ge=1, le=24 * 366 * 100)
    """How far back to look."""


def _stamp(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _cut(value: Any, limit: int) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


class TeamDigestTool(TeamsTool[TeamDigestArgs]):
    NAME = "team_digest"
    DESCRIPTION = (
        "List what happened in a team over the last `hours` (tasks created, finished, members joining, ...), one line "
        "per event, for you to summarise."
    )
    Args = TeamDigestArgs
    FACTS = ToolFacts(idempotent=True, concurrent_safe=True, tags=("teams",))

    async def call(self, args: TeamDigestArgs) -> dict[str, Any]:
        team = self.team_for(args.team_id)
        end = datetime.now(UTC).timestamp()
        start = end - args.hours * 3600
        events = self.store.events(team["id"], start, end)
        lines = []
        for e in events:
            fields = ", ".join(f"{k}={_cut(v, 80)}" for k, v in list(e["payload"].items())[:3])
            lines.append(
                f"[{_stamp(e['created_at'])}] {e['event_type']} by {e['agent_id'] or '-'}"
                + (f" ({fields})" if fields else "")
            )
        message = f"{len(events)} event(s) in team '{team['name']}' over the last {args.hours} hour(s)."
        if team["leader_id"] == caller():
            message += " You are the team leader."
        return {
            "team_id": team["id"],
            "period_start": datetime.fromtimestamp(start, UTC).isoformat(),
            "period_end": datetime.fromtimestamp(end, UTC).isoformat(),
            "event_count": len(events),
            "events_summary": "\n".join(lines) if lines else "No events recorded in this period.",
            "message": message,
        }


class TeamUsageArgs(ToolArgs):
    team_id: str = Field(max_length=100)
    """The team."""
    since: int | None = Field(default=None, ge=0)
    """Start (epoch seconds, inclusive)."""
    until: int | None = Field(default=None, ge=0)
    """End (epoch seconds, inclusive)."""


class TeamUsageTool(TeamsTool[TeamUsageArgs]):
    NAME = "team_usage"
    DESCRIPTION = (
        "Sum what a team's members spent: tool calls made for its tasks, and the tokens and cost the host reported, "
        "per member and in total, against the team's budget."
    )
    Args = TeamUsageArgs
    FACTS = ToolFacts(idempotent=True, concurrent_safe=True, tags=("teams",))

    async def call(self, args: TeamUsageArgs) -> dict[str, Any]:
        team = self.team_for(args.team_id)
        reported = {u["agent_id"]: u for u in self.store.usage(team["id"], args.since, args.until)}
        tasks = self.store.team_tasks(team["id"])
        per_agent = []
        for member in team["members"]:
            mine = [t for t in tasks if t["owner"] == member["agent_id"]]
            got = reported.get(member["agent_id"], {})
            per_agent.append(
                {
                    "agent_id": member["agent_id"],
                    "tool_calls": sum(t["used_calls"] for t in mine),
                    "input_tokens": got.get("input_tokens", 0),
                    "output_tokens": got.get("output_tokens", 0),
                    "cost": round(got.get("cost", 0.0), 6),
                    "budget": member["budget"] or None,
                }
            )
        total = {k: sum(a[k] for a in per_agent) for k in ("tool_calls", "input_tokens", "output_tokens")}
        total["cost"] = round(sum(a["cost"] for a in per_agent), 6)
        return drop_empty(
            {
                "team_id": team["id"],
                "since": args.since,
                "until": args.until,
                "member_count": len(team["members"]),
                "total": total,
                "budget": team["budget"] or None,
                "per_agent": [drop_empty(a) | {"agent_id": a["agent_id"]} for a in per_agent],
            }
        )


Decision = Literal["approve", "approved", "reject", "rejected"]
