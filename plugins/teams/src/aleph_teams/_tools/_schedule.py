"""Schedule tools: cron_manage and the heartbeat_* family (persisted jobs the scheduler runs)."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field

import aleph
from aleph import ToolArgs, ToolFacts
from aleph_teams._acting import consent
from aleph_teams._tools._base import TeamsTool, caller, drop_empty, json_object, refs

__all__ = [
    "CronManageTool",
    "HeartbeatCreateTool",
    "HeartbeatDeleteTool",
    "HeartbeatListTool",
    "HeartbeatReportTool",
    "HeartbeatToggleTool",
    "HeartbeatUpdateTool",
    "next_run",
]

MIN_INTERVAL_MS = 1000


class AtSchedule(BaseModel):
    """Once, at a moment."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    type: Literal["at"]
    at_ms: int = Field(ge=0)
    """UTC epoch milliseconds; must be in the future."""
    delete_after_run: bool = True
    """Remove the job after it ran."""


class EverySchedule(BaseModel):
    """At a fixed interval."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    type: Literal["every"]
    every_ms: int = Field(ge=0, le=366 * 86_400_000)
    """Interval in milliseconds (at least 1000)."""


class CronSchedule(BaseModel):
    """A cron expression."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    type: Literal["cron"]
    expr: str = Field(max_length=200)
    """6 fields (sec min hour dom mon dow, e.g. "0 0 9 * * *") or the classic 5 (min hour dom mon dow)."""
    timezone: str | None = Field(default=None, max_length=64)
    """IANA time zone (default UTC)."""


Schedule = Annotated[AtSchedule | EverySchedule | CronSchedule, Field(discriminator="type")]


def _zone(name: str | None) -> ZoneInfo:
    try:
        return ZoneInfo(name or "UTC")
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"Invalid cron schedule: unknown time zone '{name}'") from None


def next_run(schedule: dict[str, Any], after: float) -> float | None:
    """The first run time strictly after ``after`` (epoch seconds), or None when the schedule is over."""
    kind = schedule["type"]
    if kind == "at":
        at = schedule["at_ms"] / 1000
        return at if at > after else None
    if kind == "every":
        return after + schedule["every_ms"] / 1000
    from croniter import croniter

    expr = schedule["expr"]
    six = len(expr.split()) == 6
    start = datetime.fromtimestamp(after, _zone(schedule.get("timezone")))
    return float(croniter(expr, start, second_at_beginning=six).get_next(float))


def _when(schedule: dict[str, Any]) -> str:
    """A schedule in words, for the approval a human sees."""
    if schedule["type"] == "at":
        return f"once at {datetime.fromtimestamp(schedule['at_ms'] / 1000, UTC).isoformat()}"
    if schedule["type"] == "every":
        return f"every {schedule['every_ms'] / 1000:g} s"
    return f"on cron '{schedule['expr']}'"


def check_schedule(schedule: dict[str, Any], now_s: float) -> None:
    """Refuse a schedule that would never run or is malformed, with the original's messages."""
    kind = schedule["type"]
    if kind == "at" and schedule["at_ms"] / 1000 <= now_s:
        raise ValueError(
            f"Cannot schedule a one-shot task in the past. at_ms={schedule['at_ms']} resolves to "
            f"{datetime.fromtimestamp(schedule['at_ms'] / 1000, UTC).isoformat()}, but current time is "
            f"{int(now_s * 1000)}ms. Provide a future timestamp."
        )
    if kind == "every" and schedule["every_ms"] < MIN_INTERVAL_MS:
        raise ValueError(f"Interval too short: every_ms={schedule['every_ms']} is below the 1000ms minimum.")
    if kind == "cron":
        from croniter import croniter

        expr = schedule["expr"].strip()
        fields = len(expr.split())
        if fields not in (5, 6) or not croniter.is_valid(expr, second_at_beginning=fields == 6):
            raise ValueError(f"Invalid cron schedule: '{expr}' is not a 5- or 6-field cron expression")
        _zone(schedule.get("timezone"))


class CronManageArgs(ToolArgs):
    action: Literal["create", "list", "get", "delete", "enable", "disable", "toggle", "run", "update"]
    """What to do."""
    name: str | None = Field(default=None, max_length=200)
    """Job name (create, update)."""
    prompt: str | None = Field(default=None, max_length=50_000)
    """What the agent is asked to do on each run (create, update)."""
    schedule: Schedule | None = None
    """When it runs (create, update)."""
    agent_id: str | None = Field(default=None, max_length=200)
    """The agent that runs it (default: you); each run is an unattended turn of this agent acting for you.
    Another agent must accept delegation from you, or an operator approves it when the job is created."""
    job_id: str | None = Field(default=None, max_length=100)
    """The job (all actions but create and list)."""
    enabled: bool | None = None
    """For update: enable or disable."""
    missed: Literal["skip", "run_once", "run_all"] | None = None
    """Runs missed while no scheduler was up: skip, run the latest once (default), or run each (capped)."""


def _job_view(job: dict[str, Any]) -> dict[str, Any]:
    return drop_empty(
        {
            "id": job["id"],
            "name": job["name"],
            "enabled": job["enabled"],
            "schedule_kind": job["schedule"]["type"],
            "schedule": job["schedule"],
            "agent_id": job["agent_id"],
            "prompt": job["prompt"],
            "missed": job["missed"],
            "source_channel_id": job["source_channel_id"],
            "state": drop_empty(
                {
                    "run_count": job["run_count"],
                    "last_run_status": job["last_status"],
                    "last_run_at": job["last_run_at"],
                    "next_run": job["next_run"],
                    "last_error": job["last_error"],
                }
            ),
            "created_at": job["created_at"],
            "updated_at": job["updated_at"],
        }
    ) | {"enabled": job["enabled"]}


class CronManageTool(TeamsTool[CronManageArgs]):
    NAME = "cron_manage"
    DESCRIPTION = (
        "Manage scheduled agent jobs (operator only): create (name, prompt, schedule at|every|cron), list, get, "
        "delete, enable, disable, toggle, run now, update. The scheduler inside `aleph serve` or `aleph scheduler` "
        "runs each as an unattended turn that never waits for a human."
    )
    Args = CronManageArgs
    FACTS = ToolFacts(tags=("teams", "operator"), requires_role="operator")

    def _need(self, args: CronManageArgs, *fields: str) -> None:
        for f in fields:
            if getattr(args, f) is None:
                raise self.invalid(f"cron_manage {args.action}: '{f}' is required")

    async def call(self, args: CronManageArgs) -> dict[str, Any]:
        store = self.store
        if args.action == "list":
            jobs = store.list_cron()
            return {"message": f"{len(jobs)} scheduled job(s)", "jobs": [_job_view(j) for j in jobs]}
        if args.action == "create":
            self._need(args, "name", "prompt", "schedule")
            assert args.schedule is not None and args.name is not None and args.prompt is not None
            schedule = args.schedule.model_dump()
            now_s = time.time()
            try:
                check_schedule(schedule, now_s)
                first = next_run(schedule, now_s)
            except ValueError as exc:
                raise self.invalid(str(exc)) from None
            call = aleph.current_call()
            turn = call.turn if call is not None else None
            agent = args.agent_id or caller()
            await consent(self.NAME, agent, f"run the scheduled job '{args.name}' ({_when(schedule)})")
            job = store.create_cron(
                {
                    "name": args.name,
                    "prompt": args.prompt,
                    "schedule": schedule,
                    "agent_id": agent,
                    "missed": args.missed or self.host.config.scheduler.missed,
                    "next_run": first,
                    "source_channel_id": (turn.channel_id if turn else None) or (call.channel if call else None),
                    "source_conversation_id": turn.conversation_id if turn else None,
                }
            )
            refs(job_id=job["id"])
            return {
                "message": f"scheduled job '{job['name']}' created (ID: {job['id']})",
                "job_id": job["id"],
                "job": _job_view(job),
            }
        self._need(args, "job_id")
        assert args.job_id is not None
        refs(job_id=args.job_id)
        job = store.get_cron(args.job_id)
        if job is None:
            raise self.fail(f"cron job '{args.job_id}' not found")
        if args.action == "get":
            return {"message": f"job '{job['name']}' ({job['id']})", "job_id": job["id"], "job": _job_view(job)}
        if args.action == "delete":
            store.delete_cron(job["id"])
            return {"message": f"scheduled job {job['id']} deleted", "job_id": job["id"]}
        if args.action in ("enable", "disable", "toggle"):
            on = {"enable": True, "disable": False, "toggle": not job["enabled"]}[args.action]
            fields: dict[str, Any] = {"enabled": on}
            if on and not job["enabled"]:
                fields["next_run"] = next_run(job["schedule"], time.time())  # resume from now, not from the past
            after = store.update_cron(job["id"], **fields)
            assert after is not None
            word = "enabled" if on else "disabled"
            msg = word if args.action == "toggle" else f"scheduled job {job['id']} {word}"
            return {"message": msg, "job_id": job["id"], "job": _job_view(after)}
        if args.action == "run":
            store.update_cron(job["id"], run_requested=True)
            return {
                "message": f"scheduled job {job['id']} triggered by hand; it runs in the next check cycle",
                "job_id": job["id"],
            }
        if args.agent_id is not None and args.agent_id != job["agent_id"]:
            await consent(self.NAME, args.agent_id, f"run the scheduled job '{job['name']}' ({_when(job['schedule'])})")
        fields = {
            k: v
            for k, v in (
                ("name", args.name),
                ("prompt", args.prompt),
                ("agent_id", args.agent_id),
                ("enabled", args.enabled),
                ("missed", args.missed),
            )
            if v is not None
        }
        if args.schedule is not None:
            schedule = args.schedule.model_dump()
            try:
                check_schedule(schedule, time.time())
            except ValueError as exc:
                raise self.invalid(str(exc)) from None
            fields["schedule"] = schedule
            fields["next_run"] = next_run(schedule, time.time())
        after = store.update_cron(job["id"], **fields)
        assert after is not None
        return {"message": f"scheduled job {job['id']} updated", "job_id": job["id"], "job": _job_view(after)}


# -- heartbeats --------------------------------------------------------------------------------------


class GreaterThan(BaseModel):
    model_config = ConfigDict(extra="forbid")
    threshold: float


class Contains(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str = Field(max_length=1000)


class GreaterThanCondition(BaseModel):
    """Trigger when the probe's output, read as a number, is above the threshold."""

    model_config = ConfigDict(extra="forbid")
    greater_than: GreaterThan


class ContainsCondition(BaseModel):
    """Trigger when the probe's output contains the text."""

    model_config = ConfigDict(extra="forbid")
    contains: Contains


Trigger = Literal["always", "non_empty", "changed"] | GreaterThanCondition | ContainsCondition


def _hb_view(t: dict[str, Any]) -> dict[str, Any]:
    return drop_empty(
        {
            "id": t["id"],
            "name": t["name"],
            "agent_id": t["agent_id"],
            "enabled": t["enabled"],
            "interval_ms": t["interval_ms"],
            "probe": t["probe"],
            "state": drop_empty(
                {
                    "next_due_ms": int(t["next_run"] * 1000) if t["next_run"] else None,
                    "last_probe_at_ms": int(t["last_probe_at"] * 1000) if t["last_probe_at"] else None,
                    "last_probe_result": t["last_probe_result"],
                    "last_l2_status": t["last_l2_status"],
                    "consecutive_errors": t["consecutive_errors"],
                    "last_error": t["last_error"],
                }
            ),
        }
    ) | {"enabled": t["enabled"]}


class HeartbeatListTool(TeamsTool[ToolArgs]):
    NAME = "heartbeat_list"
    DESCRIPTION = "List heartbeat monitoring tasks: periodic probes (a tool called on an interval) and their state."
    Args = ToolArgs
    FACTS = ToolFacts(idempotent=True, concurrent_safe=True, tags=("teams",))

    async def call(self, args: ToolArgs) -> dict[str, Any]:
        tasks = self.store.list_heartbeats()
        return {"message": f"{len(tasks)} heartbeat monitoring tasks", "tasks": [_hb_view(t) for t in tasks]}


class HeartbeatCreateArgs(ToolArgs):
    name: str = Field(min_length=1, max_length=200)
    """Name."""
    probe_tool_name: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_-]+$")
    """The tool called on each beat (an unattended call through the chokepoint as agent_id)."""
    interval_ms: int = Field(ge=0, le=366 * 86_400_000)
    """Milliseconds between beats (at least 1000)."""
    probe_trigger_condition: Trigger = "always"
    """When the output calls for the agent: always, non_empty, changed, {"greater_than": {"threshold": n}},
    {"contains": {"text": "..."}}."""
    agent_id: str | None = Field(default=None, max_length=200)
    """The agent that runs the probe and the analysis (default: you), acting for you: your permissions and
    its own both apply. Another agent must accept delegation from you, or an operator approves it now."""
    probe_tool_params: str | None = Field(default=None, max_length=100_000)
    """The probe tool's input: a JSON object as text (default {})."""


class HeartbeatCreateTool(TeamsTool[HeartbeatCreateArgs]):
    NAME = "heartbeat_create"
    DESCRIPTION = (
        "Create a heartbeat (operator only): call a probe tool every interval_ms; when its output meets the trigger "
        "condition, the agent is asked to analyse it and end with heartbeat_report."
    )
    Args = HeartbeatCreateArgs
    FACTS = ToolFacts(tags=("teams", "operator"), requires_role="operator")

    async def call(self, args: HeartbeatCreateArgs) -> dict[str, Any]:
        if args.interval_ms < MIN_INTERVAL_MS:
            raise self.invalid(f"Interval too short: interval_ms={args.interval_ms} is below the 1000ms minimum.")
        trigger = args.probe_trigger_condition
        probe = {
            "tool_name": args.probe_tool_name,
            "tool_params": json_object(self, "probe_tool_params", args.probe_tool_params),
            "trigger_condition": trigger if isinstance(trigger, str) else trigger.model_dump(),
        }
        agent = args.agent_id or caller()
        await consent(
            self.NAME,
            agent,
            f"call `{args.probe_tool_name}` every {args.interval_ms / 1000:g} s (heartbeat '{args.name}')",
        )
        task = self.store.create_heartbeat(
            {"name": args.name, "agent_id": agent, "interval_ms": args.interval_ms, "probe": probe}
        )
        refs(heartbeat_id=task["id"])
        return {"message": f"Heartbeat task '{args.name}' created (ID: {task['id']})", "task_id": task["id"]}


class HeartbeatUpdateArgs(ToolArgs):
    id: str = Field(max_length=100)
    """The heartbeat."""
    name: str | None = Field(default=None, max_length=200)
    """New name."""
    agent_id: str | None = Field(default=None, max_length=200)
    """New agent."""
    interval_ms: int | None = Field(default=None, ge=0, le=366 * 86_400_000)
    """New interval (at least 1000)."""
    enabled: bool | None = None
    """Enable or disable."""


class HeartbeatUpdateTool(TeamsTool[HeartbeatUpdateArgs]):
    NAME = "heartbeat_update"
    DESCRIPTION = "Update a heartbeat's name, agent, interval or enabled flag (operator only)."
    Args = HeartbeatUpdateArgs
    FACTS = ToolFacts(tags=("teams", "operator"), requires_role="operator")

    async def call(self, args: HeartbeatUpdateArgs) -> dict[str, Any]:
        if args.interval_ms is not None and args.interval_ms < MIN_INTERVAL_MS:
            raise self.invalid(f"Interval too short: interval_ms={args.interval_ms} is below the 1000ms minimum.")
        fields = {
            k: v
            for k, v in (
                ("name", args.name),
                ("agent_id", args.agent_id),
                ("interval_ms", args.interval_ms),
                ("enabled", args.enabled),
            )
            if v is not None
        }
        if args.interval_ms is not None:
            fields["next_run"] = time.time() + args.interval_ms / 1000
        refs(heartbeat_id=args.id)
        beat = self.store.get_heartbeat(args.id)
        if beat is None:
            raise self.fail(f"Failed to update heartbeat task: '{args.id}' not found")
        if args.agent_id is not None and args.agent_id != beat["agent_id"]:
            probe = beat["probe"].get("tool_name", "")
            await consent(self.NAME, args.agent_id, f"call `{probe}` on heartbeat '{beat['name']}'")
        if self.store.update_heartbeat(args.id, **fields) is None:
            raise self.fail(f"Failed to update heartbeat task: '{args.id}' not found")
        return {"message": f"Heartbeat task {args.id} updated"}


class HeartbeatIdArgs(ToolArgs):
    id: str = Field(max_length=100)
    """The heartbeat."""


class HeartbeatDeleteTool(TeamsTool[HeartbeatIdArgs]):
    NAME = "heartbeat_delete"
    DESCRIPTION = "Delete a heartbeat (operator only)."
    Args = HeartbeatIdArgs
    FACTS = ToolFacts(tags=("teams", "operator"), requires_role="operator")

    async def call(self, args: HeartbeatIdArgs) -> dict[str, Any]:
        refs(heartbeat_id=args.id)
        if not self.store.delete_heartbeat(args.id):
            raise self.fail(f"heartbeat task '{args.id}' not found")
        return {"message": f"Heartbeat task {args.id} deleted"}


class HeartbeatToggleTool(TeamsTool[HeartbeatIdArgs]):
    NAME = "heartbeat_toggle"
    DESCRIPTION = "Enable a disabled heartbeat or disable an enabled one (operator only)."
    Args = HeartbeatIdArgs
    FACTS = ToolFacts(tags=("teams", "operator"), requires_role="operator")

    async def call(self, args: HeartbeatIdArgs) -> dict[str, Any]:
        refs(heartbeat_id=args.id)
        task = self.store.get_heartbeat(args.id)
        if task is None:
            raise self.fail(f"heartbeat task '{args.id}' not found")
        on = not task["enabled"]
        fields: dict[str, Any] = {"enabled": on}
        if on:
            fields["next_run"] = time.time() + task["interval_ms"] / 1000
        self.store.update_heartbeat(args.id, **fields)
        return {
            "message": f"Heartbeat task {args.id} {'enabled' if on else 'disabled'}",
            "task_id": args.id,
            "enabled": on,
        }


class HeartbeatReportArgs(ToolArgs):
    action: Literal["silent", "notify"]
    """silent: nothing worth telling; notify: deliver `message`."""
    message: str | None = Field(default=None, max_length=20_000)
    """The finding (required for notify)."""


class HeartbeatReportTool(TeamsTool[HeartbeatReportArgs]):
    NAME = "heartbeat_report"
    DESCRIPTION = (
        "End a heartbeat analysis: action 'silent' when nothing needs attention, or 'notify' with a message for the "
        "operator. The scheduler reads this call."
    )
    Args = HeartbeatReportArgs
    FACTS = ToolFacts(tags=("teams",))

    async def call(self, args: HeartbeatReportArgs) -> dict[str, Any]:
        message = (args.message or "").strip()
        if args.action == "notify" and not message:
            raise self.invalid('heartbeat_report(action="notify") requires a non-empty message.')
        refs(reported_by=caller())
        return {"action": args.action, "message": message, "acknowledged": True}
