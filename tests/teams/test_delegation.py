"""Working for another agent never gains a permission: consent first, then the whole chain's policy and budget.

``mallory`` is denied ``counter_bump`` (a real side effect in SQLite) and ``task_create``; ``admin`` and
the usual team agents are not. Every way the family runs work as another agent is tried: a team member
(live ``team_delegate`` and the background dispatcher running a workflow step), a heartbeat and a cron
job fired by ``aleph scheduler --once`` or the scheduler, and a member's own nested team.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from aleph_teams import MemberTask
from aleph_teams._service import Scheduler

import aleph
from aleph import ApprovalOutcome, ScriptedRequester, ToolError, TurnContext

from .helpers import Runners, consents, counter, runtime, total

pytestmark = pytest.mark.anyio

DENY_MALLORY = '\n[agents.mallory.tool_permissions.overrides]\ncounter_bump = "deny"\ntask_create = "deny"\n'


def host_of(rt: aleph.Aleph) -> Any:
    entry = rt.registry.get("team_create")
    assert entry is not None
    return entry.tool.host  # type: ignore[attr-defined]


def service(rt: aleph.Aleph, agent: str, role: str | None = None, **kw: Any) -> aleph.ScopedToolService:
    turn = TurnContext(caller_role=role) if role is not None else None
    return rt.tool_service(agent=agent, turn=turn, **kw)


async def bump(task: MemberTask) -> str:
    try:
        out = await task.tools.call("counter_bump", {"name": task.agent_id})
    except ToolError as exc:
        return f"refused: {exc}"
    return f"bumped {out.value['n']}"


async def test_enrolling_another_agent_needs_its_consent_or_an_operators_approval(workspace: Path) -> None:
    create = {"name": "heist", "members": [{"agent_id": "admin", "runner": "py"}]}
    async with runtime(workspace, Runners({"py": bump}), consent=False) as rt:
        says_yes = ScriptedRequester([ApprovalOutcome.APPROVED] * 4)  # a guest's own approval does not count
        with pytest.raises(aleph.PermissionDenied, match="a guest cannot approve it"):
            await service(rt, "mallory", "guest", requester=says_yes).execute("team_create", create)
        assert all(r.tool_name != "delegate" for r in says_yes.requests)
        with pytest.raises(aleph.PermissionDenied, match="no approval channel"):
            await service(rt, "mallory").execute("team_create", create)
        no = ScriptedRequester([ApprovalOutcome.DENIED])
        with pytest.raises(aleph.ApprovalDenied):
            await service(rt, "mallory", requester=no).execute("team_create", create)
        assert host_of(rt).store.list_teams() == []  # nothing was half-made by a refusal
        yes = ScriptedRequester([ApprovalOutcome.APPROVED])
        made = (await service(rt, "mallory", requester=yes).execute("team_create", create)).value
        assert made["members"] == [{"agent_id": "admin", "role": ""}]
        (asked,) = yes.requests
        assert asked.summary.startswith("mallory wants admin to join team 'heist' led by mallory")
        # adding a member later asks the same way
        with pytest.raises(aleph.PermissionDenied):
            await service(rt, "mallory").execute("team_member_add", {"team_id": made["team_id"], "agent_id": "alice"})


async def test_a_member_acting_for_its_leader_cannot_do_what_the_leader_may_not(workspace: Path) -> None:
    db = workspace / "counter.db"
    toml = DENY_MALLORY + consents(("admin",), accepts=("mallory",)) + consents(("w1",), accepts=("lead",))
    async with runtime(workspace, Runners({"py": bump}, db), consent=False, toml=toml) as rt:
        heist = {"name": "heist", "members": [{"agent_id": "admin", "runner": "py"}]}
        team = (await service(rt, "mallory").execute("team_create", heist)).value["team_id"]
        out = (
            await service(rt, "mallory").execute(
                "team_delegate", {"team_id": team, "agent_id": "admin", "task": "bump via admin"}
            )
        ).value
        assert out["reply"].startswith("refused:") and "counter_bump" in out["reply"]
        assert total(db) == 0
        # the same work for a leader that may bump runs: the refusal came from mallory's part of the chain
        fair = {"name": "fair", "members": [{"agent_id": "w1", "runner": "py"}]}
        team = (await service(rt, "lead").execute("team_create", fair)).value["team_id"]
        out = (
            await service(rt, "lead").execute("team_delegate", {"team_id": team, "agent_id": "w1", "task": "b"})
        ).value
        assert out["reply"] == "bumped 1" and counter(db, "w1") == 1


async def test_a_workflow_step_run_in_the_background_acts_for_whoever_ran_the_workflow(workspace: Path) -> None:
    db = workspace / "counter.db"
    toml = DENY_MALLORY + consents(("admin",), accepts=("mallory",))
    async with runtime(workspace, Runners({"py": bump}, db), consent=False, toml=toml) as rt:
        await rt.start_services()
        mallory = service(rt, "mallory")
        heist = {"name": "heist", "members": [{"agent_id": "admin", "runner": "py"}]}
        team = (await mallory.execute("team_create", heist)).value["team_id"]
        flow = {"name": "steal", "steps": [{"id": "a", "agent": "admin", "prompt": "bump {input}"}]}
        await mallory.execute("workflow", {"action": "save", "definition": flow})
        run = (await mallory.execute("workflow", {"action": "run", "name": "steal", "team_id": team})).value
        waited = (await mallory.execute("task_wait", {"task_ids": run["task_ids"], "timeout_seconds": 60})).value
        assert waited["completed"] == run["task_ids"]
        status = (
            await mallory.execute(
                "workflow", {"action": "status", "name": "steal", "team_id": team, "include_output": True}
            )
        ).value
        assert status["steps"][0]["output"].startswith("refused:") and total(db) == 0


async def test_a_heartbeat_naming_another_agent_is_refused_without_its_consent(workspace: Path) -> None:
    beat = {"name": "hb", "agent_id": "admin", "probe_tool_name": "task_create", "interval_ms": 60_000}
    async with runtime(workspace, consent=False, toml=DENY_MALLORY) as rt:
        for role in ("guest", "member"):  # schedules are the operator's: a role the tool declares, not prose
            says_yes = ScriptedRequester([ApprovalOutcome.APPROVED] * 4)
            with pytest.raises(aleph.PermissionDenied, match="needs the operator role"):
                await service(rt, "mallory", role, requester=says_yes).execute("heartbeat_create", beat)
        with pytest.raises(aleph.PermissionDenied, match="admin has not accepted delegation from mallory"):
            await service(rt, "mallory").execute("heartbeat_create", beat)  # an operator, but nobody to approve
        own = (await service(rt, "mallory").execute("heartbeat_create", {**beat, "agent_id": "mallory"})).value
        with pytest.raises(aleph.PermissionDenied):  # moving one's own heartbeat to admin: the same door
            await service(rt, "mallory").execute("heartbeat_update", {"id": own["task_id"], "agent_id": "admin"})
        beats = host_of(rt).store.list_heartbeats()
        assert [(b["agent_id"], b["created_by"]) for b in beats] == [("mallory", "mallory")]
        every = {"type": "every", "every_ms": 60_000}
        with pytest.raises(aleph.PermissionDenied, match="admin has not accepted"):
            await service(rt, "mallory").execute(
                "cron_manage", {"action": "create", "name": "j", "prompt": "p", "schedule": every, "agent_id": "admin"}
            )
        assert host_of(rt).store.list_cron() == []


def test_aleph_scheduler_once_runs_a_heartbeat_as_its_creators_chain(workspace: Path) -> None:
    toml = DENY_MALLORY + consents(("admin",), accepts=("mallory",))
    probe = '{"subject": "written via admin"}'

    async def setup() -> str:
        async with runtime(workspace, consent=False, toml=toml) as rt:
            made = (
                await service(rt, "mallory").execute(
                    "heartbeat_create",
                    {
                        "name": "hb",
                        "agent_id": "admin",
                        "probe_tool_name": "task_create",
                        "probe_tool_params": probe,
                        "interval_ms": 60_000,
                    },
                )
            ).value
            host_of(rt).store.update_heartbeat(made["task_id"], next_run=time.time() - 1)
            return str(made["task_id"])

    beat_id = asyncio.run(setup())
    out = subprocess.run(
        [sys.executable, "-m", "aleph", "--config", str(workspace / "aleph.toml"), "scheduler", "--once"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "ALEPH_DISABLE_PLUGINS": ""},
    )
    assert out.returncode == 0, out.stderr

    async def check() -> tuple[dict[str, Any], list[dict[str, Any]]]:
        async with runtime(workspace, consent=False, toml=toml) as rt:
            store = host_of(rt).store
            return store.get_heartbeat(beat_id), store.list_tasks()

    beat, tasks = asyncio.run(check())
    assert [r["status"] for r in asyncio.run(_runs(workspace, toml, beat_id))] == ["error"]
    assert "task_create" in beat["last_error"] and beat["consecutive_errors"] == 1
    assert tasks == []  # admin alone could have; admin acting for mallory could not


async def _runs(workspace: Path, toml: str, beat_id: str) -> list[dict[str, Any]]:
    async with runtime(workspace, consent=False, toml=toml) as rt:
        return host_of(rt).store.schedule_runs("heartbeat", beat_id)  # type: ignore[no-any-return]


async def test_a_cron_job_for_another_agent_runs_as_the_chain(workspace: Path) -> None:
    db = workspace / "counter.db"
    toml = DENY_MALLORY + consents(("admin",), accepts=("mallory",))
    async with runtime(
        workspace, Runners({"py": bump}, db), teams='default_runner = "py"', consent=False, toml=toml
    ) as rt:
        host = host_of(rt)
        every = {"type": "every", "every_ms": 60_000}
        made = (
            await service(rt, "mallory").execute(
                "cron_manage",
                {"action": "create", "name": "j", "prompt": "bump", "schedule": every, "agent_id": "admin"},
            )
        ).value
        host.store.update_cron(made["job_id"], next_run=time.time() - 1)
        assert len(await Scheduler(host).fire_cron(host.store.get_cron(made["job_id"]), time.time())) == 1
        (task,) = host.store.list_tasks()
        assert (task["owner"], task["created_by"]) == ("admin", "mallory")
        assert task["result"].startswith("refused:") and total(db) == 0
        # the run's task is mallory's and admin's, nobody else's
        listed = (await service(rt, "alice").execute("task_list", {})).value
        assert listed["tasks"] == []


async def test_a_members_own_team_spends_only_what_is_left_of_its_budget(workspace: Path) -> None:
    db = workspace / "counter.db"

    async def w1_delegates(task: MemberTask) -> str:
        made = await task.tools.call("team_create", {"name": "side", "members": [{"agent_id": "w2", "runner": "w2"}]})
        out = await task.tools.call(
            "team_delegate", {"team_id": made.value["team_id"], "agent_id": "w2", "task": "bump eight times"}
        )
        return str(out.value.get("reply"))

    async def w2_bumps(task: MemberTask) -> str:
        done = 0
        for _ in range(8):
            try:
                await task.tools.call("counter_bump", {"name": "w2"})
            except aleph.PermissionDenied:
                break
            done += 1
        return f"{done} of 8"

    toml = consents(("w1",), accepts=("lead",)) + consents(("w2",), accepts=("w1", "lead"))
    runners = Runners({"py": w1_delegates, "w2": w2_bumps}, db)
    async with runtime(workspace, runners, consent=False, toml=toml) as rt:
        lead = service(rt, "lead")
        capped = {"name": "capped", "members": [{"agent_id": "w1", "runner": "py"}], "budget": {"calls": 3}}
        team = (await lead.execute("team_create", capped)).value["team_id"]
        out = (await lead.execute("team_delegate", {"team_id": team, "agent_id": "w1", "task": "go"})).value
        # w1's three calls: team_create, team_delegate, and one of w2's eight bumps
        assert out["reply"] == "1 of 8" and counter(db, "w2") == 1


async def test_a_task_without_a_team_for_another_agent_needs_its_consent(workspace: Path) -> None:
    async with runtime(workspace, consent=False, toml=consents(("bob",), accepts=("alice",))) as rt:
        with pytest.raises(aleph.PermissionDenied, match="admin has not accepted delegation from mallory"):
            await service(rt, "mallory").execute("task_create", {"subject": "for admin", "owner": "admin"})
        own = (await service(rt, "mallory").execute("task_create", {"subject": "mine", "owner": "mallory"})).value
        with pytest.raises(aleph.PermissionDenied, match="admin has not accepted"):
            await service(rt, "mallory").execute("task_update", {"task_id": own["task_id"], "owner": "admin"})
        assert [t["owner"] for t in host_of(rt).store.list_tasks()] == ["mallory"]
        made = (await service(rt, "alice").execute("task_create", {"subject": "errand", "owner": "bob"})).value
        assert made["owner"] == "bob"


async def test_a_template_team_is_led_by_its_creator_and_its_workers_consent(workspace: Path) -> None:
    folder = workspace / "tpl"
    folder.mkdir()
    worker = {"id": "admin", "role": "ops"}
    (folder / "coup.json").write_text(
        json.dumps({"id": "coup", "leader": {"id": "admin"}, "workers": [], "tasks": []}), encoding="utf-8"
    )
    (folder / "crew.json").write_text(
        json.dumps({"id": "crew", "leader": {"id": "self"}, "workers": [worker], "tasks": []}), encoding="utf-8"
    )
    teams = f'templates_dir = "{folder.as_posix()}"'
    async with runtime(workspace, consent=False, teams=teams) as rt:
        mallory = service(rt, "mallory")
        with pytest.raises(aleph.ExecutionFailed, match="a team you create is led by you"):
            await mallory.execute("team_from_template", {"template": "coup", "team_name": "coup"})
        with pytest.raises(aleph.PermissionDenied, match="admin has not accepted delegation from mallory"):
            await mallory.execute("team_from_template", {"template": "crew", "team_name": "crew"})
        assert host_of(rt).store.list_teams() == []
