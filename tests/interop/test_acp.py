"""ACP: a real agent (built with the SDK, run under bubblewrap) whose hands are Aleph's tools."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

import aleph

from .conftest import acp_config, runtime

pytestmark = pytest.mark.anyio


def service(rt: aleph.Aleph, agent: str = "alice", requester: Any = None) -> aleph.ScopedToolService:
    turn = aleph.TurnContext(session_key=f"s-{agent}", caller_role="operator")
    return rt.tool_service(agent=agent, turn=turn, tier="auto", requester=requester)


async def delegate(svc: aleph.ScopedToolService, task: str, **extra: Any) -> dict[str, Any]:
    result = await svc.call("acp_delegate", {"task": task, **extra})
    assert result.success, result.error
    return json.loads(result.output)


async def test_the_agents_reads_and_writes_are_alephs_tool_calls(workspace: Path) -> None:
    (workspace / "a.txt").write_text("alpha\nbeta\n")
    async with runtime(workspace, acp_config()) as rt:
        out = await delegate(service(rt), "read a.txt\nwrite b.txt hello from acp", agent="script")
    ledger = rt.chokepoint.ledger
    assert ledger is not None
    rows = [r for r in ledger.rows("alice") if r.target == "file_write"]
    assert (workspace / "b.txt").read_text() == "hello from acp"
    assert out["files_read"] == ["a.txt"] and out["files_written"] == ["b.txt"]
    assert "read 11 characters" in out["reply"] and out["untrusted"] is True
    assert len(rows) == 1 and rows[0].refs.get("parent_call")


async def test_a_protected_write_is_refused_and_the_agent_is_told(workspace: Path) -> None:
    async with runtime(workspace, acp_config()) as rt:
        before = (workspace / "aleph.toml").read_text()
        out = await delegate(service(rt), "write aleph.toml [policies]\nsay still here", agent="script")
    assert (workspace / "aleph.toml").read_text() == before
    assert out["files_written"] == [] and len(out["refused"]) == 1
    assert "write failed" in out["reply"] and "still here" in out["reply"]


async def test_the_agent_cannot_write_the_workspace_behind_alephs_back(workspace: Path) -> None:
    async with runtime(workspace, acp_config()) as rt:
        out = await delegate(service(rt), "direct sneaky.txt x", agent="script")
    assert "direct write of sneaky.txt failed: Read-only file system" in out["reply"]
    assert not (workspace / "sneaky.txt").exists()


async def test_permission_questions_are_answered_by_policy(workspace: Path) -> None:
    policy = '[policies.tool_permissions.overrides]\n"file_write(secret/**)" = "deny"\n'
    async with runtime(workspace, acp_config(policy)) as rt:
        out = await delegate(service(rt), "ask-write notes.txt ok\nask-write secret/key.txt leak", agent="script")
    assert (workspace / "notes.txt").read_text() == "ok" and not (workspace / "secret").exists()
    assert "permission for notes.txt: yes" in out["reply"] and "permission for secret/key.txt: no" in out["reply"]
    assert [p["answer"] for p in out["permissions"]] == ["allowed", "rejected"]


async def test_an_edit_the_policy_asks_about_is_asked_once_at_the_write(workspace: Path) -> None:
    policy = '[policies.tool_permissions.overrides]\nfile_write = "ask"\n'
    human = aleph.ScriptedRequester([aleph.ApprovalOutcome.DENIED])
    async with runtime(workspace, acp_config(policy)) as rt:
        out = await delegate(service(rt, requester=human), "ask-write plan.md draft", agent="script")
    # The agent cannot write behind Aleph's back, so the human is asked once, when the write comes through.
    assert [r.tool_name for r in human.requests] == ["file_write"]
    assert "ask-write failed" in out["reply"] and not (workspace / "plan.md").exists()


async def test_a_command_the_policy_asks_about_goes_to_alephs_human(workspace: Path) -> None:
    policy = '[policies.tool_permissions.overrides]\nbash = "ask"\n'
    human = aleph.ScriptedRequester([aleph.ApprovalOutcome.DENIED])
    async with runtime(workspace, acp_config(policy)) as rt:
        out = await delegate(service(rt, requester=human), "ask-run curl https://example.org", agent="script")
    [asked] = human.requests
    assert asked.tool_name == "bash" and asked.arguments["command"] == "curl https://example.org"
    assert "permission to run: no" in out["reply"] and out["permissions"][0]["answer"] == "rejected"


async def test_terminals_are_bash_calls_through_the_chokepoint(workspace: Path) -> None:
    async with runtime(workspace, acp_config()) as rt:
        out = await delegate(service(rt), "run echo made > t.txt && cat t.txt", agent="script")
    assert "exit 0: made" in out["reply"] and (workspace / "t.txt").read_text() == "made\n"
    assert out["commands"] == ["bash -c 'echo made > t.txt && cat t.txt'"]


async def test_a_denied_command_reaches_the_agent_as_a_refusal(workspace: Path) -> None:
    policy = '[policies.tool_permissions.overrides]\nbash = "deny"\n'
    async with runtime(workspace, acp_config(policy)) as rt:
        out = await delegate(service(rt), "run touch x.txt", agent="script")
    assert "exit 126: refused by Aleph" in out["reply"] and not (workspace / "x.txt").exists()


async def test_sessions_are_owned_and_continue_where_they_left_off(workspace: Path) -> None:
    async with runtime(workspace, acp_config()) as rt:
        first = await delegate(service(rt, "alice"), "say one", agent="script")
        again = await delegate(service(rt, "alice"), "say two", session_id=first["session_id"])
        assert again["session_id"] == first["session_id"] and "two" in again["reply"]
        eve = service(rt, "eve")
        foreign = await eve.call("acp_delegate", {"task": "say hi", "session_id": first["session_id"]})
        missing = await eve.call("acp_delegate", {"task": "say hi", "session_id": "000000000000"})
        assert foreign.error.replace(first["session_id"], "X") == missing.error.replace("000000000000", "X")
        listed = json.loads((await eve.call("acp_switch", {"action": "list"})).output)
        assert listed == {"sessions": []}
        mine = json.loads((await service(rt).call("acp_switch", {"action": "list"})).output)
        assert [s["prompts"] for s in mine["sessions"]] == [2]


async def test_cancel_stops_a_running_prompt(workspace: Path) -> None:
    async with runtime(workspace, acp_config()) as rt:
        alice = service(rt)
        first = await delegate(alice, "say ready", agent="script")
        running = asyncio.ensure_future(alice.call("acp_delegate", {"task": "slow", "session_id": first["session_id"]}))
        while (
            not json.loads((await alice.call("acp_switch", {"action": "list"})).output)["sessions"][0]["status"]
            == "prompting"
        ):
            await asyncio.sleep(0.02)  # poll until the prompt runs
        cancel = await alice.call("acp_switch", {"action": "cancel", "session_id": first["session_id"]})
        assert json.loads(cancel.output)["cancelled"] is True
        result = await running
    assert json.loads(result.output)["stop_reason"] == "cancelled"


async def test_an_unknown_agent_and_a_missing_bwrap_say_what_to_do(workspace: Path, monkeypatch) -> None:
    async with runtime(workspace, acp_config()) as rt:
        unknown = await service(rt).call("acp_delegate", {"task": "x", "agent": "gemini"})
        assert "no ACP agent named 'gemini' (configured: script)" in unknown.error
        monkeypatch.setenv("PATH", "/nonexistent")
        nobwrap = await service(rt).call("acp_delegate", {"task": "x", "agent": "script"})
        assert "bubblewrap (bwrap) is not installed" in nobwrap.error
