"""Members on all three runners: in-process callables, a real CLI agent subprocess, an in-process A2A server.

A member's tool calls pass the chokepoint under its own agent name, with its budget and the team and
task ids on the ledger rows.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from aleph_teams import A2ARunner, MemberTask, RunResult, SubprocessRunner

import aleph
from aleph import ExecutionFailed

from .helpers import Runners, counter, runtime

pytestmark = pytest.mark.anyio
AGENT = str(Path(__file__).parent / "agents" / "cli_agent.py")


async def call(rt: aleph.Aleph, agent: str, name: str, payload: dict[str, Any]) -> Any:
    return (await rt.tool_service(agent=agent).execute(name, payload)).value


async def team_of(
    rt: aleph.Aleph, runner: str, budget: dict[str, Any] | None = None, member_budget: dict[str, Any] | None = None
) -> str:
    spec: dict[str, Any] = {"agent_id": "w1", "role": "worker", "runner": runner}
    if member_budget:
        spec["budget"] = member_budget
    payload: dict[str, Any] = {"name": "crew", "members": [spec]}
    if budget:
        payload["budget"] = budget
    return str((await call(rt, "lead", "team_create", payload))["team_id"])


async def bumper(task: MemberTask) -> str:
    ns = []
    for _ in range(int(task.subject.split()[1])):
        ns.append((await task.tools.call("counter_bump", {"name": task.task_id})).value["n"])
    task.report_usage(input_tokens=10, output_tokens=5, cost=0.002)
    return f"bumped to {ns[-1]}"


async def test_callable_member_calls_run_as_the_member_with_team_and_task_on_the_ledger(workspace: Path) -> None:
    db = workspace / "counter.db"
    async with runtime(workspace, Runners({"py": bumper}, db)) as rt:
        team = await team_of(rt, "py")
        out = await call(rt, "lead", "team_delegate", {"team_id": team, "agent_id": "w1", "task": "count 3"})
        assert out["status"] == "completed" and out["reply"] == "bumped to 3"
        assert counter(db, out["task_id"]) == 3
        assert rt.chokepoint.ledger is not None
        await rt.chokepoint.ledger.flush()
        rows = [r for r in rt.chokepoint.ledger.rows("w1") if r.target == "counter_bump"]
        assert len(rows) == 3
        assert all(
            r.refs is not None and r.refs["team_id"] == team and r.refs["task_id"] == out["task_id"] for r in rows
        )
        lead_rows = [r for r in rt.chokepoint.ledger.rows("lead") if r.target == "team_delegate"]
        assert lead_rows and lead_rows[-1].refs is not None and lead_rows[-1].refs["task_id"] == out["task_id"]
        usage = await call(rt, "lead", "team_usage", {"team_id": team})
        w1 = next(a for a in usage["per_agent"] if a["agent_id"] == "w1")
        assert (w1["tool_calls"], w1["input_tokens"], w1["output_tokens"]) == (3, 10, 5)
        artifacts = await call(rt, "w1", "task_read_artifact", {"task_id": out["task_id"]})
        assert artifacts["artifacts"][0]["title"] == "Delegation result: count 3"


async def test_the_members_own_permissions_apply_to_its_calls(workspace: Path) -> None:
    db = workspace / "counter.db"
    toml = '[agents.w1.tool_permissions.overrides]\ncounter_bump = "deny"\n'
    async with runtime(workspace, Runners({"py": bumper}, db), toml=toml) as rt:
        team = await team_of(rt, "py")
        out = await call(rt, "lead", "team_delegate", {"team_id": team, "agent_id": "w1", "task": "count 1"})
        assert out["status"] == "failed" and "permission denied for tool counter_bump" in out["error"]
        assert counter(db, out["task_id"]) == 0
        # The leader itself may still bump: the rule is the member's.
        assert (await call(rt, "lead", "counter_bump", {"name": "x"}))["n"] == 1


async def test_a_task_budget_refuses_the_call_past_its_cap_before_it_runs(workspace: Path) -> None:
    db = workspace / "counter.db"
    async with runtime(workspace, Runners({"py": bumper}, db)) as rt:
        team = await team_of(rt, "py", budget={"calls": 10}, member_budget={"calls": 5})
        out = await call(
            rt, "lead", "team_delegate", {"team_id": team, "agent_id": "w1", "task": "count 3", "budget": {"calls": 2}}
        )
        assert out["status"] == "failed" and "cap of 2 tool calls is reached" in out["error"]
        assert counter(db, out["task_id"]) == 2
        with pytest.raises(ExecutionFailed, match="member 'w1' has only 3 left of 5"):
            await call(
                rt,
                "lead",
                "team_delegate",
                {"team_id": team, "agent_id": "w1", "task": "count 1", "budget": {"calls": 4}},
            )


async def test_a_team_call_cap_holds_across_concurrent_members(workspace: Path) -> None:
    db = workspace / "counter.db"
    async with runtime(workspace, Runners({"py": bumper}, db)) as rt:
        members = [{"agent_id": f"m{i}", "runner": "py"} for i in range(16)]
        team = (await call(rt, "lead", "team_create", {"name": "swarm", "members": members, "budget": {"calls": 40}}))[
            "team_id"
        ]
        outs = await asyncio.gather(
            *(
                call(rt, "lead", "team_delegate", {"team_id": team, "agent_id": f"m{i}", "task": "count 5"})
                for i in range(16)
            )
        )
        total = sum(counter(db, o["task_id"]) for o in outs)
        assert total == 40
        assert sum(1 for o in outs if o["status"] == "failed") >= 8


async def test_timeout_settles_the_task_as_failed(workspace: Path) -> None:
    async def slow(task: MemberTask) -> str:
        await asyncio.sleep(60)
        return "late"

    async with runtime(workspace, Runners({"py": slow})) as rt:
        team = await team_of(rt, "py")
        out = await call(
            rt, "lead", "team_delegate", {"team_id": team, "agent_id": "w1", "task": "x", "timeout_secs": 1}
        )
        assert out == {"task_id": out["task_id"], "status": "timeout", "error": "Timed out after 1 seconds"}
        assert (await call(rt, "lead", "team_status", {"team_id": team}))["tasks"][0]["status"] == "failed"


def _subprocess_toml(extra: str = "") -> str:
    return f'[teams.runners.cli]\ntype = "subprocess"\ncommand = ["{sys.executable}", "{AGENT}"]\n{extra}'


async def test_subprocess_agent_calls_tools_through_the_chokepoint_and_reports_usage(workspace: Path) -> None:
    db = workspace / "counter.db"
    async with runtime(workspace, Runners({}, db), toml=_subprocess_toml()) as rt:
        team = await team_of(rt, "cli")
        out = await call(rt, "lead", "team_delegate", {"team_id": team, "agent_id": "w1", "task": "count 2"})
        assert out["status"] == "completed" and out["reply"] == "counted [1, 2] in attempt 1"
        assert counter(db, out["task_id"]) == 2
        usage = await call(rt, "lead", "team_usage", {"team_id": team})
        w1 = next(a for a in usage["per_agent"] if a["agent_id"] == "w1")
        assert (w1["tool_calls"], w1["input_tokens"], w1["cost"]) == (2, 100, 0.01)
        plain = await call(rt, "lead", "team_delegate", {"team_id": team, "agent_id": "w1", "task": "plain"})
        assert plain["reply"] == "plain answer for w1"
        failed = await call(rt, "lead", "team_delegate", {"team_id": team, "agent_id": "w1", "task": "fail"})
        assert failed["status"] == "failed" and "exited with status 3: something broke" in failed["error"]


async def test_subprocess_timeout_kills_the_whole_process_group(workspace: Path) -> None:
    pidfile = workspace / "child.pid"
    toml = _subprocess_toml(f'env = {{ CLI_AGENT_PIDFILE = "{pidfile}" }}\n')
    async with runtime(workspace, Runners({}), toml=toml) as rt:
        team = await team_of(rt, "cli")
        out = await call(
            rt, "lead", "team_delegate", {"team_id": team, "agent_id": "w1", "task": "spawn", "timeout_secs": 2}
        )
        assert out["status"] == "timeout"
        grandchild = int(pidfile.read_text())
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                os.kill(grandchild, 0)
            except ProcessLookupError:
                break
            await asyncio.sleep(0.05)
        with pytest.raises(ProcessLookupError):
            os.kill(grandchild, 0)


async def test_subprocess_runner_that_cannot_start_says_so(workspace: Path) -> None:
    runner = SubprocessRunner(["/nonexistent/agent"])
    async with runtime(workspace, Runners({"bad": runner})) as rt:
        team = await team_of(rt, "bad")
        out = await call(rt, "lead", "team_delegate", {"team_id": team, "agent_id": "w1", "task": "x"})
        assert (
            out["status"] == "failed"
            and "agent runner not available: cannot start '/nonexistent/agent'" in out["error"]
        )


def _a2a_app(behaviour: str) -> Any:
    from a2a.helpers.proto_helpers import new_task, new_text_message
    from a2a.server.agent_execution import AgentExecutor
    from a2a.server.request_handlers import DefaultRequestHandler
    from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
    from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
    from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, TaskState
    from starlette.applications import Starlette

    class Executor(AgentExecutor):
        async def execute(self, context: Any, event_queue: Any) -> None:
            text = context.get_user_input()
            task = context.current_task or new_task(context.task_id, context.context_id, TaskState.TASK_STATE_SUBMITTED)
            await event_queue.enqueue_event(task)
            updater = TaskUpdater(event_queue, task.id, task.context_id)
            await updater.start_work()
            if behaviour == "fail":
                await updater.failed(new_text_message("cannot do that"))
                return
            if behaviour == "hang":
                await asyncio.sleep(3600)
            await updater.add_artifact(
                [
                    __import__("a2a.helpers.proto_helpers", fromlist=["x"]).new_text_part(
                        f"remote did: {text.splitlines()[0]}"
                    )
                ]
            )
            await updater.complete()

        async def cancel(self, context: Any, event_queue: Any) -> None:
            updater = TaskUpdater(event_queue, context.task_id, context.context_id)
            await updater.cancel()

    card = AgentCard(
        name="remote",
        description="test agent",
        version="1.0",
        supported_interfaces=[AgentInterface(protocol_binding="JSONRPC", url="http://remote.test/")],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="do", name="do", description="does", tags=["t"])],
    )
    handler = DefaultRequestHandler(agent_executor=Executor(), task_store=InMemoryTaskStore(), agent_card=card)
    return Starlette(routes=[*create_agent_card_routes(card), *create_jsonrpc_routes(handler, "/")])


@pytest.mark.parametrize("behaviour", ["ok", "fail"])
async def test_a2a_member_runs_on_an_in_process_a2a_server(workspace: Path, behaviour: str) -> None:
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app=_a2a_app(behaviour)), base_url="http://remote.test")
    runner = A2ARunner("http://remote.test", httpx_client=http)
    async with runtime(workspace, Runners({"a2a": runner})) as rt:
        team = await team_of(rt, "a2a")
        out = await call(rt, "lead", "team_delegate", {"team_id": team, "agent_id": "w1", "task": "summarise the log"})
        if behaviour == "ok":
            assert out["status"] == "completed" and out["reply"] == "remote did: summarise the log"
        else:
            assert out["status"] == "failed" and "TASK_STATE_FAILED" in out["error"]
    await http.aclose()


async def test_unreachable_a2a_agent_is_not_available(workspace: Path) -> None:
    runner = A2ARunner("http://127.0.0.1:9/")
    async with runtime(workspace, Runners({"a2a": runner})) as rt:
        team = await team_of(rt, "a2a")
        out = await call(rt, "lead", "team_delegate", {"team_id": team, "agent_id": "w1", "task": "x"})
        assert (
            out["status"] == "failed" and "agent runner not available: A2A agent at http://127.0.0.1:9/" in out["error"]
        )


async def test_runner_result_object_and_sync_functions(workspace: Path) -> None:
    db = workspace / "counter.db"

    def sync_agent(task: MemberTask) -> RunResult:
        n = task.tools.call_sync("counter_bump", {"name": task.task_id}).value["n"]
        return RunResult(f"sync {n}", input_tokens=1)

    async with runtime(workspace, Runners({"sync": sync_agent}, db)) as rt:
        team = await team_of(rt, "sync")
        out = await call(rt, "lead", "team_delegate", {"team_id": team, "agent_id": "w1", "task": "go"})
        assert out["reply"] == "sync 1"
