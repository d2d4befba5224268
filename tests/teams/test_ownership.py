"""Who owns what in the teams family: another principal's objects answer exactly like missing ones.

Each test makes an object as one agent, then reaches for it as another (``mallory``) by its real id
and by an id that never existed, and asserts the two answers are the same text: no existence oracle.
Protocol messages that carry a leader's decision are refused from anyone but the leader.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from aleph_teams._store import open_store

import aleph
from aleph import ApprovalOutcome, ScriptedRequester, ToolError

from .helpers import consents, runtime

pytestmark = pytest.mark.anyio

MISSING = "00000000-0000-4000-8000-000000000000"


async def call(rt: aleph.Aleph, agent: str, name: str, payload: dict[str, Any], **kw: Any) -> Any:
    return (await rt.tool_service(agent=agent, **kw).execute(name, payload)).value


async def refusal(rt: aleph.Aleph, agent: str, name: str, payload: dict[str, Any], **kw: Any) -> str:
    """The error text of a call that must fail."""
    with pytest.raises(ToolError) as info:
        await call(rt, agent, name, payload, **kw)
    return str(info.value)


async def same_as_missing(rt: aleph.Aleph, name: str, payload: dict[str, Any], field: str, real: str) -> None:
    """Mallory's call on the real id fails with the text of the same call on an id that never existed."""
    foreign = await refusal(rt, "mallory", name, {**payload, field: real})
    missing = await refusal(rt, "mallory", name, {**payload, field: MISSING})
    assert foreign == missing.replace(MISSING, real)


def approve() -> ScriptedRequester:
    return ScriptedRequester([ApprovalOutcome.APPROVED] * 4)


async def test_heartbeats_are_listed_and_changed_by_their_creator_only(workspace: Path, store_url: str) -> None:
    async with runtime(workspace, store=store_url) as rt:
        mine = await call(
            rt, "alice", "heartbeat_create", {"name": "a", "probe_tool_name": "task_list", "interval_ms": 5000}
        )
        await call(
            rt, "mallory", "heartbeat_create", {"name": "m", "probe_tool_name": "task_list", "interval_ms": 5000}
        )
        listed = await call(rt, "mallory", "heartbeat_list", {})
        assert [t["name"] for t in listed["tasks"]] == ["m"]
        beat = mine["task_id"]
        await same_as_missing(rt, "heartbeat_update", {"interval_ms": 9000}, "id", beat)
        await same_as_missing(rt, "heartbeat_toggle", {}, "id", beat)
        foreign = await refusal(rt, "mallory", "heartbeat_delete", {"id": beat}, requester=approve())
        missing = await refusal(rt, "mallory", "heartbeat_delete", {"id": MISSING}, requester=approve())
        assert foreign == missing.replace(MISSING, beat)
        alice = await call(rt, "alice", "heartbeat_list", {})
        assert [(t["id"], t["interval_ms"], t["enabled"]) for t in alice["tasks"]] == [(beat, 5000, True)]


async def test_cron_jobs_answer_only_their_creator(workspace: Path) -> None:
    async with runtime(workspace) as rt:
        every = {"type": "every", "every_ms": 60_000}
        job = await call(
            rt, "alice", "cron_manage", {"action": "create", "name": "n", "prompt": "p", "schedule": every}
        )
        assert (await call(rt, "mallory", "cron_manage", {"action": "list"}))["jobs"] == []
        for action in ("get", "run", "disable", "toggle", "update"):
            await same_as_missing(rt, "cron_manage", {"action": action}, "job_id", job["job_id"])
        foreign = await refusal(
            rt, "mallory", "cron_manage", {"action": "delete", "job_id": job["job_id"]}, requester=approve()
        )
        assert "not found" in foreign
        got = await call(rt, "alice", "cron_manage", {"action": "get", "job_id": job["job_id"]})
        assert got["job"]["enabled"] is True
        entry = rt.registry.get("cron_manage")
        assert entry is not None
        raw = entry.tool.host.store.get_cron(job["job_id"])  # type: ignore[attr-defined]
        assert raw["run_requested"] is False and raw["prompt"] == "p"  # mallory's run and update changed nothing


async def test_workflow_templates_belong_to_whoever_saved_them(workspace: Path) -> None:
    async with runtime(workspace) as rt:
        flow = {"name": "flow", "steps": [{"id": "a", "agent": "w1", "prompt": "alice's secret {input}"}]}
        await call(rt, "alice", "workflow", {"action": "save", "definition": flow})
        assert (await call(rt, "mallory", "workflow", {"action": "list"}))["workflows"] == []
        foreign = await refusal(rt, "mallory", "workflow", {"action": "describe", "name": "flow"})
        missing = await refusal(rt, "mallory", "workflow", {"action": "describe", "name": "other"})
        assert foreign == missing.replace("other", "flow")
        # the same name is free for mallory, and saving it leaves alice's untouched
        mine = {"name": "flow", "steps": [{"id": "b", "agent": "w9", "prompt": "mallory {input}"}]}
        await call(rt, "mallory", "workflow", {"action": "save", "definition": mine})
        got = await call(rt, "alice", "workflow", {"action": "describe", "name": "flow"})
        assert got["definition"]["steps"][0]["prompt"] == "alice's secret {input}"


async def test_a_task_without_a_team_is_its_creators_and_owners(workspace: Path) -> None:
    async with runtime(workspace, toml=consents(("bob",), accepts=("alice",))) as rt:
        task = (await call(rt, "alice", "task_create", {"subject": "alice's errand", "owner": "bob"}))["task_id"]
        await call(rt, "bob", "task_comment", {"task_id": task, "body": "on it"})  # the owner reaches it
        assert [t["id"] for t in (await call(rt, "alice", "task_list", {}))["tasks"]] == [task]
        assert (await call(rt, "mallory", "task_list", {}))["tasks"] == []
        for name, payload in (
            ("task_update", {"status": "cancelled"}),
            ("task_comment", {"body": "x"}),
            ("task_submit", {"artifact_type": "report", "title": "t", "content": "c"}),
        ):
            await same_as_missing(rt, name, payload, "task_id", task)
        waited = await call(rt, "mallory", "task_wait", {"task_ids": [task], "timeout_seconds": 1})
        missing = await call(rt, "mallory", "task_wait", {"task_ids": [MISSING], "timeout_seconds": 1})
        assert waited["pending"] == [task] and waited["summary"] == missing["summary"].replace(MISSING, task)
        assert (await call(rt, "mallory", "task_read_artifact", {"task_id": task}))["artifacts"] == []
        review = await call(rt, "mallory", "task_review", {"task_id": task, "decision": "approve"})
        assert review["status"] == "not_found"
        assert (await call(rt, "alice", "task_list", {}))["tasks"][0]["status"] == "pending"


async def test_artifacts_of_another_task_look_missing(workspace: Path) -> None:
    async with runtime(workspace) as rt:
        team = (await call(rt, "lead", "team_create", {"name": "t", "members": [{"agent_id": "w1"}]}))["team_id"]
        own = (await call(rt, "mallory", "task_create", {"subject": "mine"}))["task_id"]
        theirs = (await call(rt, "lead", "task_create", {"subject": "theirs", "team_id": team, "owner": "w1"}))[
            "task_id"
        ]
        secret = await call(
            rt, "w1", "task_submit", {"task_id": theirs, "artifact_type": "report", "title": "s", "content": "secret"}
        )
        # an artifact id of another task, asked through mallory's own task: the answer for an unknown id
        foreign = await refusal(
            rt, "mallory", "task_read_artifact", {"task_id": own, "artifact_id": secret["artifact_id"]}
        )
        missing = await refusal(rt, "mallory", "task_read_artifact", {"task_id": own, "artifact_id": MISSING})
        assert foreign == missing.replace(MISSING, secret["artifact_id"])
        read = await call(rt, "lead", "task_read_artifact", {"task_id": theirs, "artifact_id": secret["artifact_id"]})
        assert read["artifacts"][0]["content"] == "secret"


async def test_team_mail_events_and_snapshots_are_the_teams(workspace: Path, store_url: str) -> None:
    async with runtime(workspace, store=store_url) as rt:
        team = (await call(rt, "lead", "team_create", {"name": "t", "members": [{"agent_id": "w1"}]}))["team_id"]
        await call(rt, "lead", "message_send", {"team_id": team, "to": ["w1"], "subject": "s", "content": "secret"})
        snap = await call(rt, "lead", "team_snapshot", {"action": "create", "team_id": team})
        for name, payload in (
            ("inbox_read", {"peek": True}),
            ("inbox_read", {"count_only": True}),
            ("message_send", {"to": ["w1"], "subject": "x", "content": "y"}),
            ("team_digest", {}),
            ("team_usage", {}),
            ("plan_submit", {"title": "p", "content": "c"}),
            ("lifecycle_idle", {}),
        ):
            await same_as_missing(rt, name, payload, "team_id", team)
        foreign = await refusal(
            rt, "mallory", "team_snapshot", {"action": "restore", "snapshot_id": snap["snapshot_id"]}
        )
        missing = await refusal(rt, "mallory", "team_snapshot", {"action": "restore", "snapshot_id": MISSING})
        assert foreign == missing.replace(MISSING, snap["snapshot_id"])
        unread = await call(rt, "w1", "inbox_read", {"team_id": team, "peek": True})
        assert [m["content"] for m in unread["messages"]] == ["secret"]


async def test_a_plan_artifact_is_read_by_its_team_not_by_others(workspace: Path) -> None:
    async with runtime(workspace) as rt:
        team = (await call(rt, "lead", "team_create", {"name": "t", "members": [{"agent_id": "w1"}]}))["team_id"]
        plan = await call(
            rt, "w1", "plan_submit", {"team_id": team, "title": "P", "content": "the plan", "task_id": "plan-1"}
        )
        got = await call(rt, "lead", "task_read_artifact", {"task_id": "plan-1"})
        assert [a["id"] for a in got["artifacts"]] == [plan["artifact_id"]]
        assert (await call(rt, "mallory", "task_read_artifact", {"task_id": "plan-1"}))["artifacts"] == []


async def test_a_thread_shows_a_member_only_the_messages_it_sent_or_received(workspace: Path, store_url: str) -> None:
    async with runtime(workspace, store=store_url) as rt:
        members = [{"agent_id": "w1"}, {"agent_id": "w2"}]
        team = (await call(rt, "lead", "team_create", {"name": "t", "members": members}))["team_id"]
        root = await call(
            rt, "lead", "message_send", {"team_id": team, "to": ["w1", "w2"], "subject": "all", "content": "hi"}
        )
        dm = {"team_id": team, "to": ["w2"], "subject": "dm", "content": "w2's raise", "reply_to": root["message_id"]}
        await call(rt, "lead", "message_send", dm)
        read = {"team_id": team, "mode": "thread", "thread_id": root["message_id"]}
        assert [m["subject"] for m in (await call(rt, "w1", "inbox_read", read))["messages"]] == ["all"]
        assert [m["subject"] for m in (await call(rt, "w2", "inbox_read", read))["messages"]] == ["all", "dm"]
        assert [m["subject"] for m in (await call(rt, "lead", "inbox_read", read))["messages"]] == ["all", "dm"]


@pytest.mark.parametrize(
    ("kind", "to"),
    [
        ("plan_approved", ["w2"]),
        ("plan_rejected", ["w2"]),
        ("shutdown_approved", ["w2"]),
        ("shutdown_rejected", ["w2"]),
        ("system_notification", ["w2"]),
        ("shutdown_request", ["w2"]),
        ("shutdown_request", ["lead", "w2"]),
        ("plan_approval_request", ["w2"]),
    ],
)
async def test_a_member_cannot_send_a_leaders_protocol_message(workspace: Path, kind: str, to: list[str]) -> None:
    async with runtime(workspace) as rt:
        members = [{"agent_id": "w1"}, {"agent_id": "w2"}]
        team = (await call(rt, "lead", "team_create", {"name": "t", "members": members}))["team_id"]
        text = await refusal(
            rt, "w1", "message_send", {"team_id": team, "to": to, "msg_type": kind, "subject": "s", "content": "c"}
        )
        assert "leader" in text
        assert (await call(rt, "w2", "inbox_read", {"team_id": team, "count_only": True}))["count"] == 0
        # the leader may send it
        sent = await call(
            rt,
            "lead",
            "message_send",
            {"team_id": team, "to": ["w2"], "msg_type": kind, "subject": "s", "content": "c"},
        )
        assert sent["message_id"]


async def test_only_the_leader_resolves_a_shutdown_and_only_for_its_requester(workspace: Path) -> None:
    async with runtime(workspace) as rt:
        members = [{"agent_id": "w1"}, {"agent_id": "w2"}]
        team = (await call(rt, "lead", "team_create", {"name": "t", "members": members}))["team_id"]
        req = await call(rt, "w1", "lifecycle_request_shutdown", {"team_id": team, "reason": "done"})
        resolve = {
            "team_id": team,
            "shutdown_request_id": req["message_id"],
            "requester_agent_id": "w1",
            "decision": "approve",
        }
        assert "only the team leader" in await refusal(rt, "w2", "lifecycle_resolve_shutdown", resolve)
        wrong = await refusal(rt, "lead", "lifecycle_resolve_shutdown", {**resolve, "requester_agent_id": "w2"})
        assert "came from 'w1'" in wrong
        done = await call(rt, "lead", "lifecycle_resolve_shutdown", resolve)
        assert done["resolution"] == "approved"
        plan = await call(rt, "w1", "plan_submit", {"team_id": team, "title": "P", "content": "c"})
        approve_for_w2 = {
            "team_id": team,
            "plan_message_id": plan["plan_message_id"],
            "submitter_agent_id": "w2",
            "decision": "approve",
        }
        assert "submitted by 'w1'" in await refusal(rt, "lead", "plan_resolve", approve_for_w2)


def test_a_version_1_store_upgrades_with_owners_and_loses_nothing(tmp_path: Path) -> None:
    path = tmp_path / "teams.db"
    with sqlite3.connect(path) as conn:
        conn.executescript(
            """
            CREATE TABLE teams_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
            INSERT INTO teams_meta VALUES ('schema_version', '1');
            CREATE TABLE tasks (
                id TEXT PRIMARY KEY, team_id TEXT, subject TEXT NOT NULL, description TEXT NOT NULL DEFAULT '',
                status TEXT NOT NULL DEFAULT 'pending', owner TEXT, priority TEXT NOT NULL DEFAULT 'normal',
                result TEXT, metadata TEXT NOT NULL DEFAULT '{}', budget TEXT NOT NULL DEFAULT '{}',
                used_calls INTEGER NOT NULL DEFAULT 0, used_tokens BIGINT NOT NULL DEFAULT 0,
                used_cost REAL NOT NULL DEFAULT 0, steps INTEGER NOT NULL DEFAULT 0, created_at REAL NOT NULL,
                started_at REAL, completed_at REAL, locked_by TEXT, locked_at REAL);
            INSERT INTO tasks (id, subject, owner, created_at) VALUES ('t1', 'old', 'bob', 1);
            CREATE TABLE task_artifacts (
                id TEXT PRIMARY KEY, task_id TEXT NOT NULL, agent_id TEXT NOT NULL, artifact_type TEXT NOT NULL,
                title TEXT NOT NULL, content TEXT NOT NULL, status TEXT NOT NULL DEFAULT 'pending',
                metadata TEXT NOT NULL DEFAULT 'null', created_at REAL NOT NULL);
            CREATE TABLE workflows (name TEXT PRIMARY KEY, definition TEXT NOT NULL, updated_at REAL NOT NULL);
            INSERT INTO workflows VALUES ('wf', '{"name": "wf", "steps": []}', 1);
            CREATE TABLE cron_jobs (
                id TEXT PRIMARY KEY, name TEXT NOT NULL, prompt TEXT NOT NULL, schedule TEXT NOT NULL,
                agent_id TEXT NOT NULL, enabled INTEGER NOT NULL DEFAULT 1, missed TEXT NOT NULL DEFAULT 'run_once',
                next_run REAL, running_until REAL, run_count INTEGER NOT NULL DEFAULT 0, last_run_at REAL,
                last_status TEXT, last_error TEXT, run_requested INTEGER NOT NULL DEFAULT 0, source_channel_id TEXT,
                source_conversation_id TEXT, created_at REAL NOT NULL, updated_at REAL NOT NULL);
            CREATE TABLE heartbeats (
                id TEXT PRIMARY KEY, name TEXT NOT NULL, agent_id TEXT NOT NULL, enabled INTEGER NOT NULL DEFAULT 1,
                interval_ms BIGINT NOT NULL, probe TEXT NOT NULL, next_run REAL, running_until REAL,
                last_probe_at REAL, last_probe_result TEXT, last_l2_at REAL, last_l2_status TEXT,
                consecutive_errors INTEGER NOT NULL DEFAULT 0, last_error TEXT, created_at REAL NOT NULL,
                updated_at REAL NOT NULL);
            INSERT INTO heartbeats (id, name, agent_id, interval_ms, probe, created_at, updated_at)
                VALUES ('h1', 'hb', 'ops', 5000, '{}', 1, 1);
            """
        )
    store = open_store(str(path), tmp_path)
    try:
        task = store.get_task("t1")
        assert task is not None and (task["created_by"], task["owner"]) == ("bob", "bob")
        assert store.get_workflow("main", "wf") == {"name": "wf", "steps": []}
        beat = store.get_heartbeat("h1")
        assert beat is not None and beat["created_by"] == "ops"
        store.save_workflow("alice", "wf", {"name": "wf", "steps": [{"id": "a"}]})
        assert len(store.list_workflows("main")) == 1 and len(store.list_workflows("alice")) == 1
    finally:
        store.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT value FROM teams_meta WHERE key = 'schema_version'").fetchone() == ("2",)


def test_tools_reach_the_store_only_through_the_owned_view() -> None:
    """The one place that filters by owner: no tool module touches the unfiltered store."""
    import aleph_teams._tools as tools_pkg

    folder = Path(tools_pkg.__file__).parent
    offenders = [
        f"{path.name}: {needle}"
        for path in sorted(folder.glob("*.py"))
        for needle in ("host.store", "TeamStore", "open_store")
        if needle in path.read_text().replace("OwnedStore(self.host.store, caller_principal())", "")
    ]
    assert offenders == []
