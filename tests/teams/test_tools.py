"""The teams tools end to end, through the chokepoint, as the agents who call them (SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

import aleph
from aleph import ApprovalOutcome, ExecutionFailed, ScriptedRequester, ValidationFailed

from .helpers import Runners, runtime

pytestmark = pytest.mark.anyio


async def call(rt: aleph.Aleph, agent: str, name: str, payload: dict[str, Any], **kw: Any) -> Any:
    return (await rt.tool_service(agent=agent, **kw).execute(name, payload)).value


async def make_team(rt: aleph.Aleph, name: str = "alpha") -> str:
    out = await call(
        rt,
        "lead",
        "team_create",
        {"name": name, "members": [{"agent_id": "w1", "role": "worker"}, {"agent_id": "w2", "role": "worker"}]},
    )
    return str(out["team_id"])


async def test_teams_are_private_to_their_members(workspace: Path, store_url: str) -> None:
    async with runtime(workspace, store=store_url) as rt:
        team = await make_team(rt)
        status = await call(rt, "w1", "team_status", {"team_id": team})
        assert status["leader_id"] == "lead" and [m["agent_id"] for m in status["members"]] == ["lead", "w1", "w2"]
        with pytest.raises(ExecutionFailed, match=f"team `{team}` not found"):
            await call(rt, "outsider", "team_status", {"team_id": team})
        with pytest.raises(ExecutionFailed, match="a team named 'alpha' already exists"):
            await make_team(rt)
        with pytest.raises(ExecutionFailed, match="only the team leader \\('lead'\\) can add members"):
            await call(rt, "w1", "team_member_add", {"team_id": team, "agent_id": "w3"})
        added = await call(rt, "lead", "team_member_add", {"team_id": team, "agent_id": "acp:codex/s1"})
        assert added["is_acp"] is True
        with pytest.raises(ValidationFailed, match="not a valid agent name"):
            await call(rt, "lead", "team_member_add", {"team_id": team, "agent_id": "Bad Name"})
        await call(rt, "lead", "team_member_remove", {"team_id": team, "agent_id": "w2"})
        proto = await call(rt, "w1", "team_set_protocol", {"team_id": team, "protocol": "  be brief "})
        assert proto["protocol_set"] is True
        assert (await call(rt, "w1", "team_status", {"team_id": team}))["protocol"] == "be brief"


async def test_mail_mentions_broadcast_threads_and_waiting(workspace: Path, store_url: str) -> None:
    async with runtime(workspace, store=store_url) as rt:
        team = await make_team(rt)
        sent = await call(
            rt,
            "w1",
            "message_send",
            {
                "team_id": team,
                "to": [],
                "subject": "hi",
                "content": "@w2 look, not `@lead` nor ```\n@lead\n``` @ghost @w1",
            },
        )
        assert (await call(rt, "w2", "inbox_read", {"team_id": team, "count_only": True}))["count"] == 1
        assert (await call(rt, "lead", "inbox_read", {"team_id": team, "count_only": True}))["count"] == 0
        await call(rt, "lead", "message_send", {"team_id": team, "to": [], "subject": "all", "content": "@everyone"})
        assert (await call(rt, "lead", "inbox_read", {"team_id": team, "peek": True}))["count"] == 0
        peek = await call(rt, "w2", "inbox_read", {"team_id": team, "peek": True})
        assert [m["subject"] for m in peek["messages"]] == ["hi", "all"]
        got = await call(rt, "w2", "inbox_read", {"team_id": team})
        assert got["count"] == 2 and (await call(rt, "w2", "inbox_read", {"team_id": team}))["count"] == 0
        with pytest.raises(ExecutionFailed, match="at least one recipient"):
            await call(rt, "w1", "message_send", {"team_id": team, "to": [], "subject": "x", "content": "no one"})
        reply = await call(
            rt,
            "w2",
            "message_send",
            {"team_id": team, "to": ["w1"], "subject": "re", "content": "ok", "reply_to": sent["message_id"]},
        )
        assert reply["thread_id"] == sent["message_id"]
        thread = await call(
            rt, "w1", "inbox_read", {"team_id": team, "mode": "thread", "thread_id": sent["message_id"]}
        )
        assert [m["subject"] for m in thread["messages"]] == ["hi", "re"]
        with pytest.raises(ValidationFailed, match="thread_id is required"):
            await call(rt, "w1", "inbox_read", {"team_id": team, "mode": "thread"})

        async def send_soon() -> None:
            await asyncio.sleep(0.2)
            await call(rt, "lead", "message_send", {"team_id": team, "to": ["w1"], "subject": "later", "content": "."})

        sender = asyncio.ensure_future(send_soon())
        await call(rt, "w1", "inbox_read", {"team_id": team})  # drain
        waited = await call(rt, "w1", "inbox_read", {"team_id": team, "wait_seconds": 30})
        await sender
        assert [m["subject"] for m in waited["messages"]] == ["later"]
        empty = await call(rt, "w1", "inbox_read", {"team_id": team, "wait_seconds": 0.2})
        assert empty["count"] == 0


async def test_plans_and_lifecycle_messages(workspace: Path) -> None:
    async with runtime(workspace) as rt:
        team = await make_team(rt)
        plan = await call(rt, "w1", "plan_submit", {"team_id": team, "title": "P", "content": "steps"})
        inbox = await call(rt, "lead", "inbox_read", {"team_id": team})
        assert inbox["messages"][0]["msg_type"] == "plan_approval_request"
        assert plan["artifact_id"] in inbox["messages"][0]["content"]
        with pytest.raises(ValidationFailed, match="Invalid decision 'maybe'"):
            await call(
                rt,
                "lead",
                "plan_resolve",
                {
                    "team_id": team,
                    "plan_message_id": plan["plan_message_id"],
                    "submitter_agent_id": "w1",
                    "decision": "maybe",
                },
            )
        with pytest.raises(ExecutionFailed, match="only the team leader"):
            await call(
                rt,
                "w2",
                "plan_resolve",
                {
                    "team_id": team,
                    "plan_message_id": plan["plan_message_id"],
                    "submitter_agent_id": "w1",
                    "decision": "approve",
                },
            )
        resolved = await call(
            rt,
            "lead",
            "plan_resolve",
            {
                "team_id": team,
                "plan_message_id": plan["plan_message_id"],
                "submitter_agent_id": "w1",
                "decision": " Approved ",
                "feedback": "go",
            },
        )
        assert resolved["resolution"] == "approved"
        answer = (await call(rt, "w1", "inbox_read", {"team_id": team}))["messages"][0]
        assert answer["content"] == "Plan approved.\n\nFeedback: go" and answer["reply_to"] == plan["plan_message_id"]
        idle = await call(rt, "lead", "lifecycle_idle", {"team_id": team})
        assert idle["message_id"] is None
        await call(rt, "w1", "lifecycle_idle", {"team_id": team})
        with pytest.raises(ExecutionFailed, match="a leader cannot request its own shutdown"):
            await call(rt, "lead", "lifecycle_request_shutdown", {"team_id": team, "reason": "done"})
        with pytest.raises(ValidationFailed, match="cannot be empty"):
            await call(rt, "w2", "lifecycle_request_shutdown", {"team_id": team, "reason": "  "})
        req = await call(rt, "w2", "lifecycle_request_shutdown", {"team_id": team, "reason": "done"})
        res = await call(
            rt,
            "lead",
            "lifecycle_resolve_shutdown",
            {
                "team_id": team,
                "shutdown_request_id": req["message_id"],
                "requester_agent_id": "w2",
                "decision": "reject",
            },
        )
        assert res["resolution"] == "rejected"
        last = (await call(rt, "w2", "inbox_read", {"team_id": team}))["messages"][-1]
        assert (last["msg_type"], last["content"], last["reply_to"]) == (
            "shutdown_rejected",
            "Shutdown rejected.",
            req["message_id"],
        )
        kinds = [m["msg_type"] for m in (await call(rt, "lead", "inbox_read", {"team_id": team}))["messages"]]
        assert kinds == ["idle", "shutdown_request"]


async def test_task_board_state_machine_review_and_grounding(workspace: Path, store_url: str) -> None:
    async with runtime(workspace, store=store_url) as rt:
        team = await make_team(rt)
        a = await call(rt, "lead", "task_create", {"subject": "a", "team_id": team, "owner": "w1", "timeout_secs": 5})
        b = await call(
            rt,
            "lead",
            "task_create",
            {"subject": "b", "team_id": team, "owner": "w2", "blocked_by": [a["task_id"]], "require_grounding": True},
        )
        assert b["status"] == "blocked"
        board = (await call(rt, "w1", "task_list", {"team_id": team}))["summary"]
        assert f"◌ {b['task_id']} [blocked] [w2] (blocked by: {a['task_id']}) — b" in board
        with pytest.raises(ValidationFailed, match="Unknown or unsettable status 'done'"):
            await call(rt, "w1", "task_update", {"task_id": a["task_id"], "status": "done"})
        with pytest.raises(ExecutionFailed, match="no coord_task with id"):
            await call(rt, "outsider", "task_update", {"task_id": a["task_id"], "status": "failed"})
        patched = await call(rt, "w1", "task_update", {"task_id": a["task_id"], "metadata": '{"x": 1}'})
        assert patched["status"] == "pending"
        with pytest.raises(ValidationFailed, match="metadata: must be a JSON object"):
            await call(rt, "w1", "task_update", {"task_id": a["task_id"], "metadata": "[1]"})
        await call(
            rt, "w1", "task_submit", {"task_id": a["task_id"], "artifact_type": "report", "title": "r", "content": "c"}
        )
        arts = await call(rt, "w1", "task_read_artifact", {"task_id": a["task_id"]})
        assert [x["title"] for x in arts["artifacts"]] == ["r"]
        forbidden = await call(rt, "w1", "task_review", {"task_id": a["task_id"], "decision": "approve"})
        assert forbidden["status"] == "forbidden"
        ok = await call(rt, "lead", "task_review", {"task_id": a["task_id"], "decision": "approve", "feedback": "nice"})
        assert ok["status"] == "completed" and ok["newly_unblocked"] == ["b"]
        bounced = await call(rt, "lead", "task_review", {"task_id": b["task_id"], "decision": "approve"})
        assert bounced["status"] == "grounding_required"
        with pytest.raises(ValidationFailed, match=r"grounding\.kind 'vibes' invalid"):
            await call(
                rt,
                "lead",
                "task_review",
                {
                    "task_id": b["task_id"],
                    "decision": "approve",
                    "grounding": {"kind": "vibes", "source": "s", "value": 1},
                },
            )
        await call(
            rt,
            "lead",
            "task_review",
            {
                "task_id": b["task_id"],
                "decision": "approve",
                "grounding": {"kind": "exit_code", "source": "pytest", "value": 0},
            },
        )
        comment = await call(rt, "w2", "task_comment", {"task_id": b["task_id"], "body": " noted "})
        assert comment["author"] == "w2"
        with pytest.raises(ValidationFailed, match="body must not be empty"):
            await call(rt, "w2", "task_comment", {"task_id": b["task_id"], "body": " "})
        skipped = await call(rt, "lead", "workflow_step_review", {"action": "retry", "task_id": b["task_id"]})
        assert skipped["status"] == "pending"
        waited = await call(rt, "lead", "task_wait", {"team_id": team, "timeout_seconds": 1})
        assert waited["timed_out"] is True and waited["pending"] == [b["task_id"]]
        await call(rt, "lead", "workflow_step_review", {"action": "skip", "task_id": b["task_id"], "comment": "later"})
        waited = await call(rt, "lead", "task_wait", {"task_ids": [a["task_id"], b["task_id"], "ghost"]})
        assert waited["completed"] == [a["task_id"], b["task_id"]] and waited["pending"] == ["ghost"]
        assert "1 requested task(s) not found: ghost" in waited["summary"]


async def test_task_wait_wakes_when_another_agent_finishes_the_task(workspace: Path) -> None:
    async with runtime(workspace) as rt:
        team = await make_team(rt)
        t = await call(rt, "lead", "task_create", {"subject": "x", "team_id": team, "owner": "w1"})

        async def finish() -> None:
            await asyncio.sleep(0.2)
            await call(rt, "w1", "task_update", {"task_id": t["task_id"], "status": "completed"})

        finisher = asyncio.ensure_future(finish())
        waited = await call(rt, "lead", "task_wait", {"task_ids": [t["task_id"]], "timeout_seconds": 60})
        await finisher
        assert waited["timed_out"] is False and waited["completed"] == [t["task_id"]]


async def test_disband_needs_confirmation_and_only_the_leader(workspace: Path) -> None:
    async with runtime(workspace) as rt:
        team = await make_team(rt)
        with pytest.raises(aleph.ApprovalUnavailable):
            await call(rt, "lead", "team_disband", {"team_id": team})
        approve = ScriptedRequester([ApprovalOutcome.APPROVED, ApprovalOutcome.APPROVED])
        with pytest.raises(ExecutionFailed, match="only the team leader"):
            await call(rt, "w1", "team_disband", {"team_id": team}, requester=approve)
        out = await call(rt, "lead", "team_disband", {"team_id": team}, requester=approve)
        assert out["message"] == f"Team '{team}' has been disbanded."
        assert (await call(rt, "lead", "team_status", {"team_id": team}))["status"] == "disbanded"


async def test_snapshot_restore_canvas_template_digest_usage(workspace: Path) -> None:
    async with runtime(workspace) as rt:
        team = await make_team(rt)
        t1 = await call(rt, "lead", "task_create", {"subject": "one", "team_id": team, "owner": "w1"})
        snap = await call(rt, "lead", "team_snapshot", {"action": "create", "team_id": team, "tag": "v1"})
        await call(rt, "lead", "team_member_remove", {"team_id": team, "agent_id": "w2"})
        dry = await call(rt, "lead", "team_snapshot", {"action": "restore", "snapshot_id": snap["snapshot_id"]})
        assert dry["applied"] is False and dry["members_added"] == ["w2"]
        assert "w2" not in [
            m["agent_id"] for m in (await call(rt, "lead", "team_status", {"team_id": team}))["members"]
        ]
        await call(
            rt, "lead", "team_snapshot", {"action": "restore", "snapshot_id": snap["snapshot_id"], "apply": True}
        )
        assert "w2" in [m["agent_id"] for m in (await call(rt, "lead", "team_status", {"team_id": team}))["members"]]
        with pytest.raises(ValidationFailed, match="snapshot_id is required"):
            await call(rt, "lead", "team_snapshot", {"action": "get"})
        with pytest.raises(ExecutionFailed, match="not found"):
            await call(rt, "outsider", "team_snapshot", {"action": "get", "snapshot_id": snap["snapshot_id"]})
        canvas = {
            "nodes": [{"id": "n1", "text": "first\ndetails"}, {"id": "n2", "text": "second"}],
            "edges": [{"id": "e", "fromNode": "n1", "toNode": "n2"}],
        }
        planned = await call(
            rt, "lead", "team_workflow_canvas", {"action": "import", "team_id": team, "canvas": canvas, "dry_run": True}
        )
        assert planned["created"] == 0 and planned["tasks"][1]["blocked_by"] == ["n1"]
        made = await call(rt, "lead", "team_workflow_canvas", {"action": "import", "team_id": team, "canvas": canvas})
        assert made["created"] == 2
        cyclic = {
            "nodes": canvas["nodes"],
            "edges": [{"id": "a", "fromNode": "n1", "toNode": "n2"}, {"id": "b", "fromNode": "n2", "toNode": "n1"}],
        }
        with pytest.raises(ExecutionFailed, match="2 tasks unresolvable"):
            await call(rt, "lead", "team_workflow_canvas", {"action": "import", "team_id": team, "canvas": cyclic})
        exported = await call(rt, "lead", "team_workflow_canvas", {"action": "export", "team_id": team})
        assert exported["node_count"] == 3 and exported["edge_count"] == 1  # the cyclic import left nothing behind
        with pytest.raises(ValidationFailed, match="Invalid status filter"):
            await call(rt, "lead", "team_workflow_canvas", {"action": "export", "team_id": team, "status": "x"})
        tpl = await call(
            rt, "boss", "team_from_template", {"template": "software-dev", "team_name": "shop", "goal": "login"}
        )
        assert tpl["leader_id"] == "boss" and len(tpl["task_ids"]) == 4
        listing = await call(rt, "boss", "task_list", {"team_id": tpl["team_id"]})
        assert listing["tasks"][0]["subject"] == "Design: login"
        with pytest.raises(ExecutionFailed, match="unknown template 'nope'"):
            await call(rt, "boss", "team_from_template", {"template": "nope", "team_name": "x"})
        digest = await call(rt, "lead", "team_digest", {"team_id": team})
        assert "task_created by w1" in digest["events_summary"] and "You are the team leader." in digest["message"]
        usage = await call(rt, "lead", "team_usage", {"team_id": team})
        assert usage["member_count"] == 3 and usage["total"]["tool_calls"] == 0
        assert t1["task_id"]


async def test_workflow_save_run_status_pause_resume_cancel(workspace: Path) -> None:
    async with runtime(workspace) as rt:
        team = await make_team(rt)
        definition = {
            "name": "Ship It",
            "steps": [
                {"id": "plan", "agent": "w1", "prompt": "plan {input}"},
                {"id": "do", "agent": "w2", "prompt": "do {input}", "depends_on": ["plan"], "review": True},
            ],
        }
        with pytest.raises(ValidationFailed, match="cycle"):
            bad = {
                "name": "bad",
                "steps": [
                    {"id": "a", "agent": "w1", "prompt": "", "depends_on": ["b"]},
                    {"id": "b", "agent": "w1", "prompt": "", "depends_on": ["a"]},
                ],
            }
            await call(rt, "lead", "workflow", {"action": "save", "definition": bad})
        await call(rt, "lead", "workflow", {"action": "save", "definition": definition})
        run = await call(rt, "lead", "workflow", {"action": "run", "name": "ship-it", "team_id": team, "input": "v2"})
        status = await call(rt, "lead", "workflow", {"action": "status", "name": "ship-it", "team_id": team})
        assert [(s["step"], s["status"]) for s in status["steps"]] == [("plan", "pending"), ("do", "blocked")]
        paused = await call(rt, "lead", "workflow", {"action": "pause", "name": "ship-it", "team_id": team})
        assert len(paused["task_ids"]) == 2
        await call(rt, "lead", "workflow", {"action": "resume", "name": "ship-it", "team_id": team})
        cancelled = await call(
            rt, "lead", "workflow", {"action": "cancel", "name": "ship-it", "team_id": team, "run_id": run["run_id"]}
        )
        assert sorted(cancelled["task_ids"]) == sorted(run["task_ids"])
        with pytest.raises(ExecutionFailed, match="workflow 'nope' not found"):
            await call(rt, "lead", "workflow", {"action": "describe", "name": "nope"})


async def test_cron_and_heartbeat_validation(workspace: Path) -> None:
    async with runtime(workspace) as rt:
        with pytest.raises(ValidationFailed, match="Cannot schedule a one-shot task in the past"):
            await call(
                rt,
                "main",
                "cron_manage",
                {"action": "create", "name": "n", "prompt": "p", "schedule": {"type": "at", "at_ms": 1000}},
            )
        with pytest.raises(ValidationFailed, match="Interval too short: every_ms=999"):
            await call(
                rt,
                "main",
                "cron_manage",
                {"action": "create", "name": "n", "prompt": "p", "schedule": {"type": "every", "every_ms": 999}},
            )
        with pytest.raises(ValidationFailed, match="Invalid cron schedule"):
            await call(
                rt,
                "main",
                "cron_manage",
                {"action": "create", "name": "n", "prompt": "p", "schedule": {"type": "cron", "expr": "99 * * * *"}},
            )
        with pytest.raises(ValidationFailed, match="'prompt' is required"):
            await call(
                rt,
                "main",
                "cron_manage",
                {"action": "create", "name": "n", "schedule": {"type": "every", "every_ms": 5000}},
            )
        made = await call(
            rt,
            "main",
            "cron_manage",
            {
                "action": "create",
                "name": "daily",
                "prompt": "p",
                "schedule": {"type": "cron", "expr": "0 0 9 * * *", "timezone": "Europe/Paris"},
            },
        )
        job = made["job"]
        assert job["schedule_kind"] == "cron" and job["state"]["next_run"] > 0
        toggled = await call(rt, "main", "cron_manage", {"action": "toggle", "job_id": made["job_id"]})
        assert toggled["message"] == "disabled" and toggled["job"]["enabled"] is False
        assert (await call(rt, "main", "cron_manage", {"action": "list"}))["message"] == "1 scheduled job(s)"
        await call(
            rt,
            "main",
            "cron_manage",
            {"action": "delete", "job_id": made["job_id"]},
            requester=ScriptedRequester([ApprovalOutcome.APPROVED] * 2),
        )
        with pytest.raises(ExecutionFailed, match="not found"):
            await call(rt, "main", "cron_manage", {"action": "get", "job_id": made["job_id"]})
        with pytest.raises(ValidationFailed, match="below the 1000ms minimum"):
            await call(rt, "main", "heartbeat_create", {"name": "h", "probe_tool_name": "task_list", "interval_ms": 10})
        hb = await call(
            rt,
            "main",
            "heartbeat_create",
            {
                "name": "h",
                "probe_tool_name": "task_list",
                "interval_ms": 5000,
                "probe_trigger_condition": {"contains": {"text": "x"}},
                "probe_tool_params": json.dumps({"status": "failed"}),
            },
        )
        await call(rt, "main", "heartbeat_update", {"id": hb["task_id"], "interval_ms": 7000})
        toggled = await call(rt, "main", "heartbeat_toggle", {"id": hb["task_id"]})
        assert toggled["enabled"] is False
        listed = await call(rt, "main", "heartbeat_list", {})
        assert listed["tasks"][0]["interval_ms"] == 7000 and listed["tasks"][0]["probe"]["tool_params"] == {
            "status": "failed"
        }
        approve = ScriptedRequester([ApprovalOutcome.APPROVED])  # the auto tier asks before a *_delete tool
        await call(rt, "main", "heartbeat_delete", {"id": hb["task_id"]}, requester=approve)
        with pytest.raises(ValidationFailed, match="requires a non-empty message"):
            await call(rt, "main", "heartbeat_report", {"action": "notify", "message": " "})


async def test_team_delegate_without_a_runner_says_so_and_creates_nothing(workspace: Path) -> None:
    async with runtime(workspace, Runners({})) as rt:
        team = await make_team(rt)
        with pytest.raises(ExecutionFailed, match="agent runner not available: member 'w1' names no runner"):
            await call(rt, "lead", "team_delegate", {"team_id": team, "agent_id": "w1", "task": "x"})
        assert (await call(rt, "lead", "task_list", {"team_id": team}))["total"] == 0
