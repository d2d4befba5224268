"""Task tools: create, update, list, wait, comment, submit, read artifacts, review, workflow step review."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from aleph import ToolArgs, ToolFacts
from aleph_teams._acting import consent
from aleph_teams._store import SETTABLE, StoreError
from aleph_teams._store._common import TERMINAL
from aleph_teams._tools._base import TeamsTool, caller, drop_empty, json_object, refs
from aleph_teams._tools._teams import BudgetSpec

__all__ = [
    "TaskCommentTool",
    "TaskCreateTool",
    "TaskListTool",
    "TaskReadArtifactTool",
    "TaskReviewTool",
    "TaskSubmitTool",
    "TaskUpdateTool",
    "TaskWaitTool",
    "WorkflowStepReviewTool",
    "board",
]

_ICONS = {
    "pending": "○",
    "blocked": "◌",
    "in_progress": "◉",
    "waiting_review": "◐",
    "completed": "●",
    "failed": "✗",
    "cancelled": "⊘",
    "skipped": "⤳",
    "paused": "⏸",
    "unsatisfiable": "⊠",
}
_STATUSES = (*SETTABLE, "blocked", "unsatisfiable")


def board(tasks: list[dict[str, Any]]) -> str:
    """The task board text: one line per task with its icon, status, owner and blockers."""
    if not tasks:
        return "No tasks found."
    lines = [f"Task Board ({len(tasks)} tasks):", "─" * 60]
    for t in tasks:
        owner = f" [{t['owner']}]" if t["owner"] else ""
        blocked = f" (blocked by: {', '.join(t['blocked_by'])})" if t["blocked_by"] else ""
        lines.append(f"{_ICONS.get(t['status'], '?')} {t['id']} [{t['status']}]{owner}{blocked} — {t['subject']}")
    return "\n".join(lines)


def task_view(t: dict[str, Any]) -> dict[str, Any]:
    """The fields a model sees of a task."""
    return drop_empty(
        {
            "id": t["id"],
            "subject": t["subject"],
            "status": t["status"],
            "owner": t["owner"],
            "priority": t["priority"],
            "dependencies": t["dependencies"],
            "team_id": t["team_id"],
            "result": t["result"],
        }
    ) | {"status": t["status"]}


class TaskCreateArgs(ToolArgs):
    model_config = ConfigDict(populate_by_name=True)

    subject: str = Field(min_length=1, max_length=2000)
    """What is to be done."""
    description: str | None = Field(default=None, max_length=100_000)
    """Details."""
    team_id: str | None = Field(default=None, max_length=100)
    """The team the task belongs to."""
    owner: str | None = Field(default=None, max_length=200)
    """The member who will do it."""
    blocked_by: list[str] = Field(default_factory=list, max_length=200)
    """Tasks that must complete (or be skipped) first."""
    priority: str = Field(default="normal", max_length=20)
    """low, normal, high or critical."""
    acceptance_criteria: list[str] = Field(default_factory=list, max_length=100)
    """How the result will be judged."""
    require_grounding: bool = False
    """Approving it needs evidence (task_review grounding)."""
    max_retries: int | None = Field(default=None, ge=0, le=100)
    """Retries after a failure (0: the first failure is final)."""
    timeout_seconds: int | None = Field(
        default=None, ge=1, le=86_400, validation_alias=AliasChoices("timeout_seconds", "timeout_secs")
    )
    """Wall-clock limit of one run (alias timeout_secs)."""
    metadata: str | None = Field(default=None, max_length=100_000)
    """Free-form metadata: a JSON object as text."""
    budget: BudgetSpec | None = None
    """The task's budget, reserved from its owner's pool."""


class TaskCreateTool(TeamsTool[TaskCreateArgs]):
    NAME = "task_create"
    DESCRIPTION = (
        "Create a task on the coordination board, optionally for a team member, with dependencies (blocked_by), "
        "priority, acceptance criteria, retries, a timeout and a budget. A task that waits on others shows 'blocked'."
    )
    Args = TaskCreateArgs
    FACTS = ToolFacts(tags=("teams",))

    async def call(self, args: TaskCreateArgs) -> dict[str, Any]:
        me = caller()
        if args.team_id is not None:
            team = self.team_for(args.team_id, me)
            if args.owner and args.owner not in [m["agent_id"] for m in team["members"]]:
                raise self.fail(f"Agent '{args.owner}' is not a member of team '{team['id']}'")
        elif args.owner:  # a task without a team that another agent runs: that agent's consent, as for a schedule
            await consent(self.NAME, args.owner, f"run the task '{args.subject[:200]}'")
        metadata = json_object(self, "metadata", args.metadata)
        metadata.update(
            drop_empty(
                {
                    "managed_by": "aleph_teams",
                    "acceptance_criteria": args.acceptance_criteria,
                    "require_grounding": args.require_grounding,
                    "max_retries": args.max_retries,
                    "timeout_secs": args.timeout_seconds,
                    "origin_agent": me,
                }
            )
        )
        try:
            task = self.store.create_task(
                subject=args.subject,
                description=args.description or "",
                team_id=args.team_id,
                owner=args.owner,
                blocked_by=args.blocked_by,
                priority=args.priority,
                metadata=metadata,
                budget=args.budget.as_dict() if args.budget else None,
            )
        except StoreError as exc:
            raise self.store_error(exc) from None
        refs(team_id=args.team_id, task_id=task["id"])
        return drop_empty(
            {
                "task_id": task["id"],
                "subject": task["subject"],
                "status": task["status"],
                "owner": task["owner"],
                "message": f"Task '{task['subject']}' created (id: {task['id']})",
            }
        )


class TaskUpdateArgs(ToolArgs):
    task_id: str = Field(max_length=100)
    """The task."""
    status: str | None = Field(default=None, max_length=40)
    """New status (pending, in_progress, waiting_review, completed, failed, cancelled, skipped, paused)."""
    owner: str | None = Field(default=None, max_length=200)
    """New owner."""
    result: str | None = Field(default=None, max_length=200_000)
    """The result text."""
    metadata: str | None = Field(default=None, max_length=100_000)
    """A merge patch as JSON object text: keys laid over the metadata, a null value deletes a key."""


class TaskUpdateTool(TeamsTool[TaskUpdateArgs]):
    NAME = "task_update"
    DESCRIPTION = "Update a task's status, owner, result or metadata (merge patch). 'blocked' is derived, never stored."
    Args = TaskUpdateArgs
    FACTS = ToolFacts(tags=("teams",))

    async def call(self, args: TaskUpdateArgs) -> dict[str, Any]:
        task = self.store.get_task(args.task_id)
        if task is None or not self.reachable(task, caller()):
            raise self.fail(f"no coord_task with id '{args.task_id}'")
        refs(team_id=task["team_id"], task_id=task["id"])
        if args.owner is not None and args.owner != task["owner"]:
            if task["team_id"] is not None:
                team = self.team_for(task["team_id"])
                if args.owner not in [m["agent_id"] for m in team["members"]]:
                    raise self.fail(f"Agent '{args.owner}' is not a member of team '{team['id']}'")
            else:
                try:
                    self.store.check_hand_over(task)
                except StoreError as exc:
                    raise self.store_error(exc) from None
                await consent(self.NAME, args.owner, f"run the task '{task['subject'][:200]}'")
        if args.status is not None and args.status not in _STATUSES:
            raise self.invalid(
                f"Unknown or unsettable status '{args.status[:40]}' (expected one of: {', '.join(SETTABLE)}; "
                "blocked is derived, not stored)"
            )
        try:
            after = self.store.update_task(
                task["id"],
                status=args.status,
                owner=args.owner,
                result=args.result,
                metadata=json_object(self, "metadata", args.metadata) if args.metadata is not None else None,
                actor=caller(),
            )
        except StoreError as exc:
            raise self.store_error(exc) from None
        if after is None:
            raise self.fail(f"task not found: {args.task_id}")
        return {
            "task_id": after["id"],
            "status": after["status"],
            "message": f"Task '{after['id']}' updated to {after['status']}",
        }


class TaskListArgs(ToolArgs):
    team_id: str | None = Field(default=None, max_length=100)
    """Only this team's tasks."""
    status: str | None = Field(default=None, max_length=40)
    """Only tasks with this status (derived ones too: blocked, unsatisfiable)."""
    owner: str | None = Field(default=None, max_length=200)
    """Only this member's tasks."""
    limit: int = Field(default=200, ge=1, le=5000)
    """Most tasks listed."""


class TaskListTool(TeamsTool[TaskListArgs]):
    NAME = "task_list"
    DESCRIPTION = "List tasks as a board (critical first, then oldest), with statuses, owners and what blocks them."
    Args = TaskListArgs
    FACTS = ToolFacts(idempotent=True, concurrent_safe=True, tags=("teams",))

    async def call(self, args: TaskListArgs) -> dict[str, Any]:
        me = caller()
        if args.team_id is not None:
            self.team_for(args.team_id, me)
        status = args.status if args.status in _STATUSES else None
        tasks = self.store.list_tasks(team_id=args.team_id, status=status, owner=args.owner, limit=args.limit)
        tasks = [t for t in tasks if self.reachable(t, me)]
        return {"tasks": [task_view(t) for t in tasks], "total": len(tasks), "summary": board(tasks)}


class TaskWaitArgs(ToolArgs):
    task_ids: list[str] | None = Field(default=None, max_length=1000)
    """Tasks to wait for."""
    team_id: str | None = Field(default=None, max_length=100)
    """Or: every task of this team."""
    timeout_seconds: int = Field(default=300, ge=1, le=600)
    """Give up after this long (1-600)."""


def _settled(t: dict[str, Any]) -> bool:
    return t["status"] in TERMINAL or t["status"] == "unsatisfiable"


class TaskWaitTool(TeamsTool[TaskWaitArgs]):
    NAME = "task_wait"
    DESCRIPTION = (
        "Wait until the given tasks (or all of a team's) are settled — completed, skipped, failed, cancelled or "
        "unsatisfiable — or the timeout passes. Wakes the moment a task changes; no polling needed."
    )
    Args = TaskWaitArgs
    FACTS = ToolFacts(idempotent=True, concurrent_safe=True, tags=("teams",), max_duration_ms=630_000)

    async def call(self, args: TaskWaitArgs) -> dict[str, Any]:
        if not args.task_ids and not args.team_id:
            raise self.invalid("Either task_ids or team_id must be provided")
        me = caller()
        if args.team_id:
            self.team_for(args.team_id, me)
        wanted = list(dict.fromkeys(args.task_ids or []))

        def look() -> tuple[list[dict[str, Any]], list[str]]:
            found = self.store.get_tasks(wanted) if wanted else self.store.team_tasks(args.team_id or "")
            found = [t for t in found if self.reachable(t, me)]
            missing = [i for i in wanted if i not in {t["id"] for t in found}]
            return found, missing

        def done() -> tuple[list[dict[str, Any]], list[str]] | None:
            found, missing = look()
            return (found, missing) if all(_settled(t) for t in found) else None

        timeout = min(args.timeout_seconds, self.host.config.max_wait_seconds)
        hit = await self.store.wait_until(done, timeout)
        found, missing = hit if hit else look()
        completed = [t["id"] for t in found if t["status"] in ("completed", "skipped")]
        failed = [t["id"] for t in found if t["status"] in ("failed", "cancelled", "unsatisfiable")]
        pending = [t["id"] for t in found if not _settled(t)] + missing
        timed_out = not hit
        if not found and not missing:
            summary = "No matching tasks found."
        elif timed_out:
            summary = f"Timed out. {len(completed)} completed, {len(failed)} failed, {len(pending)} still pending."
        else:
            summary = f"All tasks resolved. {len(completed)} completed, {len(failed)} failed/cancelled."
        if missing:
            summary += f" {len(missing)} requested task(s) not found: {', '.join(missing[:20])}"
        return {
            "completed": completed,
            "failed": failed,
            "pending": pending,
            "timed_out": timed_out,
            "summary": summary,
        }


class TaskCommentArgs(ToolArgs):
    task_id: str = Field(max_length=100)
    """The task."""
    body: str = Field(max_length=50_000)
    """The comment."""


class TaskCommentTool(TeamsTool[TaskCommentArgs]):
    NAME = "task_comment"
    DESCRIPTION = "Add a permanent comment to a task (kept across retries), e.g. a finding or a hand-off note."
    Args = TaskCommentArgs
    FACTS = ToolFacts(sink=True, tags=("teams",))  # every member of the team reads it: a data-flow sink

    async def call(self, args: TaskCommentArgs) -> dict[str, Any]:
        body = args.body.strip()
        if not body:
            raise self.invalid("task_comment: body must not be empty")
        task = self.task_for(args.task_id)
        return self.store.add_comment(task["id"], caller(), body)


class TaskSubmitArgs(ToolArgs):
    task_id: str = Field(max_length=100)
    """The task (a coordination task id, or a free-form id)."""
    artifact_type: str = Field(max_length=64)
    """report, code, plan, or another type."""
    title: str = Field(min_length=1, max_length=1000)
    """Title."""
    content: str = Field(max_length=1_000_000)
    """The deliverable (markdown)."""
    metadata: str | None = Field(default=None, max_length=100_000)
    """Free-form metadata: a JSON object as text."""


class TaskSubmitTool(TeamsTool[TaskSubmitArgs]):
    NAME = "task_submit"
    DESCRIPTION = "Submit a deliverable for a task: stored as an artifact, and the task goes to waiting_review."
    Args = TaskSubmitArgs
    FACTS = ToolFacts(tags=("teams",))

    async def call(self, args: TaskSubmitArgs) -> dict[str, Any]:
        me = caller()
        task = self.task_for(args.task_id)
        metadata = json_object(self, "metadata", args.metadata) if args.metadata is not None else None
        try:
            artifact_id = self.store.add_artifact(
                args.task_id, me, args.artifact_type, args.title, args.content, metadata
            )
        except StoreError as exc:
            raise self.store_error(exc) from None
        self.store.update_task(task["id"], status="waiting_review", actor=me)
        return {
            "artifact_id": artifact_id,
            "task_id": args.task_id,
            "message": f"Artifact '{args.title}' submitted successfully for task '{args.task_id}'",
        }


class TaskReadArtifactArgs(ToolArgs):
    task_id: str = Field(max_length=100)
    """The task."""
    artifact_id: str | None = Field(default=None, max_length=100)
    """One artifact (default: all of the task's, oldest first)."""


class TaskReadArtifactTool(TeamsTool[TaskReadArtifactArgs]):
    NAME = "task_read_artifact"
    DESCRIPTION = "Read the deliverables submitted for a task (one by id, or all, oldest first)."
    Args = TaskReadArtifactArgs
    FACTS = ToolFacts(idempotent=True, concurrent_safe=True, tags=("teams",))

    async def call(self, args: TaskReadArtifactArgs) -> dict[str, Any]:
        found = self.store.artifacts(args.task_id, args.artifact_id)
        if args.artifact_id is not None and not found:
            # one answer for a missing artifact, another task's artifact and an unreachable task's
            raise self.fail(f"Artifact '{args.artifact_id}' not found")
        return {"artifacts": [{k: v for k, v in a.items() if k != "team_id"} for a in found]}


class Grounding(BaseModel):
    """Evidence for an approval."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    kind: str = Field(max_length=40)
    """exit_code, numeric or line_count."""
    source: str = Field(max_length=2000)
    """Where the value came from (a command, a file)."""
    value: str | int | float = Field()
    """The observed value."""
    note: str | None = Field(default=None, max_length=2000)
    """Anything else."""


class TaskReviewArgs(ToolArgs):
    task_id: str = Field(max_length=100)
    """The task."""
    decision: Literal["approve", "reject"]
    """approve → completed; reject → back to pending (redo)."""
    feedback: str | None = Field(default=None, max_length=50_000)
    """Stored as a comment."""
    grounding: Grounding | None = None
    """Evidence; required to approve a task with require_grounding."""


class TaskReviewTool(TeamsTool[TaskReviewArgs]):
    NAME = "task_review"
    DESCRIPTION = "As team leader, approve (→ completed) or reject (→ pending, redo) a submitted task."
    Args = TaskReviewArgs
    FACTS = ToolFacts(tags=("teams",))

    async def call(self, args: TaskReviewArgs) -> dict[str, Any]:
        if args.grounding is not None and args.grounding.kind not in ("exit_code", "numeric", "line_count"):
            raise self.invalid(
                f"task_review: grounding.kind '{args.grounding.kind}' invalid — must be one of exit_code | numeric "
                f"| line_count"
            )
        me = caller()
        task = self.store.get_task(args.task_id)
        if task is None or not self.reachable(task, me):
            return {"status": "not_found", "message": "no coord_task with that id — nothing to review"}
        refs(team_id=task["team_id"], task_id=task["id"])
        team = self.store.get_team(task["team_id"]) if task["team_id"] else None
        if team is not None and team["leader_id"] != me:
            return {"status": "forbidden", "message": "only the team leader can review tasks — ignored"}
        if args.decision == "approve" and task["metadata"].get("require_grounding") and args.grounding is None:
            return {
                "status": "grounding_required",
                "message": "this task requires grounding evidence (exit_code, numeric or line_count) to be approved",
            }
        with self.store.bulk() as tx:
            verdict = "approved" if args.decision == "approve" else "rejected"
            self.store.review_run(task["id"], verdict, "lead_agent", me, tx)
            if args.feedback:
                self.store.add_comment(task["id"], me, args.feedback, tx=tx)
            if args.grounding is not None:
                g = args.grounding
                note = f" note={g.note}" if g.note else ""
                self.store.add_comment(
                    task["id"], me, f"[grounding] kind={g.kind} source={g.source} value={g.value}{note}", tx=tx
                )
            self.store.update_task(
                task["id"], status="completed" if args.decision == "approve" else "pending", actor=me, tx=tx
            )
        if args.decision == "approve":
            return {
                "status": "completed",
                "message": "approved → completed",
                "newly_unblocked": self.store.dependents_freed(task["id"]),
            }
        return {"status": "pending", "message": "rejected → re-queued (pending)"}


class WorkflowStepReviewArgs(ToolArgs):
    action: Literal["approve", "reject", "retry", "skip"]
    """approve → completed; reject → failed; retry → pending (result cleared); skip → skipped (frees dependents)."""
    task_id: str = Field(max_length=100)
    """The step's task."""
    comment: str | None = Field(default=None, max_length=50_000)
    """Stored as a comment (and as the result, for reject)."""


class WorkflowStepReviewTool(TeamsTool[WorkflowStepReviewArgs]):
    NAME = "workflow_step_review"
    DESCRIPTION = (
        "Review one workflow step: approve, reject, retry or skip it (a skipped step satisfies its dependents)."
    )
    Args = WorkflowStepReviewArgs
    FACTS = ToolFacts(tags=("teams",))

    async def call(self, args: WorkflowStepReviewArgs) -> dict[str, Any]:
        me = caller()
        task = self.task_for(args.task_id, me)
        status = {"approve": "completed", "reject": "failed", "retry": "pending", "skip": "skipped"}[args.action]
        with self.store.bulk() as tx:
            if args.action in ("approve", "reject"):
                self.store.review_run(
                    task["id"], "approved" if args.action == "approve" else "rejected", "lead_agent", me, tx
                )
            if args.comment and args.action != "retry":
                self.store.add_comment(task["id"], me, args.comment, tx=tx)
            after = self.store.update_task(
                task["id"],
                status=status,
                actor=me,
                tx=tx,
                result=args.comment if args.action == "reject" and args.comment else None,
                clear_result=args.action == "retry",
            )
        assert after is not None
        criteria = task["metadata"].get("acceptance_criteria")
        return drop_empty({"task_id": task["id"], "status": after["status"], "acceptance_criteria": criteria}) | {
            "status": after["status"]
        }
