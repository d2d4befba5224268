"""The dispatcher and the scheduler: ready tasks run, workflows advance, schedules fire unattended."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from aleph_teams import MemberTask
from aleph_teams._service import Scheduler, triggered

import aleph

from .helpers import Runners, counter, runtime

pytestmark = pytest.mark.anyio


def host_of(rt: aleph.Aleph) -> Any:
    entry = rt.registry.get("team_create")
    assert entry is not None
    return entry.tool.host  # type: ignore[attr-defined]


async def call(rt: aleph.Aleph, agent: str, name: str, payload: dict[str, Any]) -> Any:
    return (await rt.tool_service(agent=agent).execute(name, payload)).value


async def echo(task: MemberTask) -> str:
    return f"{task.agent_id} did: {task.subject}"


async def test_services_run_a_workflow_through_its_dag_and_stop_at_review(workspace: Path) -> None:
    async with runtime(workspace, Runners({"py": echo})) as rt:
        await rt.start_services()
        team = (
            await call(
                rt,
                "lead",
                "team_create",
                {"name": "wf", "members": [{"agent_id": "w1", "runner": "py"}, {"agent_id": "w2", "runner": "py"}]},
            )
        )["team_id"]
        await call(
            rt,
            "lead",
            "workflow",
            {
                "action": "save",
                "definition": {
                    "name": "two",
                    "steps": [
                        {"id": "a", "agent": "w1", "prompt": "draft {input}"},
                        {"id": "b", "agent": "w2", "prompt": "check {input}", "depends_on": ["a"], "review": True},
                    ],
                },
            },
        )
        run = await call(rt, "lead", "workflow", {"action": "run", "name": "two", "team_id": team, "input": "doc"})
        first, second = run["task_ids"]
        done = await call(rt, "lead", "task_wait", {"task_ids": [first], "timeout_seconds": 60})
        assert done["completed"] == [first]
        status = await call(
            rt, "lead", "workflow", {"action": "status", "name": "two", "team_id": team, "include_output": True}
        )
        assert status["steps"][0]["output"] == "w1 did: draft doc"
        for _ in range(200):
            step_b = (await call(rt, "lead", "workflow", {"action": "status", "name": "two", "team_id": team}))[
                "steps"
            ][1]
            if step_b["status"] == "waiting_review":
                break
            await asyncio.sleep(0.05)
        assert step_b["status"] == "waiting_review"
        await call(rt, "lead", "task_review", {"task_id": second, "decision": "approve"})
        assert (await call(rt, "lead", "task_wait", {"team_id": team, "timeout_seconds": 5}))["timed_out"] is False


async def test_a_failed_task_is_retried_up_to_max_retries(workspace: Path) -> None:
    attempts: list[int] = []

    async def flaky(task: MemberTask) -> str:
        attempts.append(task.attempt)
        if task.attempt < 3:
            raise RuntimeError("flaky")
        return "third time"

    async with runtime(workspace, Runners({"py": flaky})) as rt:
        await rt.start_services()
        team = (await call(rt, "lead", "team_create", {"name": "r", "members": [{"agent_id": "w1", "runner": "py"}]}))[
            "team_id"
        ]
        t = await call(rt, "lead", "task_create", {"subject": "x", "team_id": team, "owner": "w1", "max_retries": 2})
        for _ in range(300):
            state = (await call(rt, "lead", "task_list", {"team_id": team}))["tasks"][0]
            if state["status"] == "completed":
                break
            await asyncio.sleep(0.05)
        assert state["status"] == "completed" and attempts == [1, 2, 3]
        assert t["task_id"] == state["id"]


async def _job(rt: aleph.Aleph, schedule: dict[str, Any], missed: str = "run_once", agent: str = "main") -> str:
    made = await call(
        rt,
        "main",
        "cron_manage",
        {
            "action": "create",
            "name": "j",
            "prompt": "count 1",
            "schedule": schedule,
            "missed": missed,
            "agent_id": agent,
        },
    )
    return str(made["job_id"])


@pytest.mark.parametrize(("policy", "runs"), [("run_once", 1), ("run_all", 5), ("skip", 0)])
async def test_runs_missed_while_down_follow_the_policy(workspace: Path, policy: str, runs: int) -> None:
    db = workspace / "counter.db"

    async def bump(task: MemberTask) -> str:
        await task.tools.call("counter_bump", {"name": "cron"})
        return "bumped"

    async with runtime(workspace, Runners({"py": bump}, db), teams='default_runner = "py"') as rt:
        host = host_of(rt)
        job_id = await _job(rt, {"type": "every", "every_ms": 120_000}, policy)
        now = time.time()
        start = now - 4 * 120 - 90  # five due times passed while nothing ran, the latest 90 s ago
        host.store.update_cron(job_id, next_run=start)
        ran = await Scheduler(host).fire_cron(host.store.get_cron(job_id), now)
        assert len(ran) == runs and counter(db, "cron") == runs
        job = host.store.get_cron(job_id)
        assert job["next_run"] > now
        assert [r["status"] for r in host.store.schedule_runs("cron", job_id)] == ["ok"] * runs + (
            ["skipped"] if runs == 0 else []
        )
        # Each due time runs at most once: firing the same state again claims nothing.
        assert await Scheduler(host).fire_cron({**job, "next_run": start}, now) == []


async def test_a_scheduled_run_is_unattended_and_never_waits_for_a_human(workspace: Path) -> None:
    asked: list[str] = []

    async def disbander(task: MemberTask) -> str:
        try:
            await task.tools.call("team_disband", {"team_id": "whatever"})
        except aleph.PermissionDenied as exc:
            return f"refused: {exc.kind}"
        return "ran"

    class Asker:
        async def request(self, request: Any) -> Any:  # pragma: no cover - must never be called
            asked.append(request.tool_name)
            raise AssertionError("an unattended run asked a human")

    async with runtime(workspace, Runners({"py": disbander}), teams='default_runner = "py"') as rt:
        host = host_of(rt)
        job_id = await _job(rt, {"type": "at", "at_ms": int((time.time() + 3600) * 1000), "delete_after_run": True})
        host.store.update_cron(job_id, next_run=time.time() - 1)
        ran = await Scheduler(host).fire_cron(host.store.get_cron(job_id), time.time())
        assert len(ran) == 1 and asked == []
        task = next(t for t in host.store.list_tasks() if t["metadata"].get("cron_job") == job_id)
        assert task["result"].startswith("refused: approval_unavailable")
        assert host.store.get_cron(job_id) is None  # a one-shot job is gone after it ran


async def test_heartbeat_probe_triggers_the_agent_which_reports(workspace: Path) -> None:
    reports: list[Any] = []

    async def analyst(task: MemberTask) -> str:
        out = await task.tools.call("heartbeat_report", {"action": "notify", "message": "a task failed"})
        reports.append(out.value)
        return "reported"

    async with runtime(workspace, Runners({"py": analyst}), teams='default_runner = "py"') as rt:
        host = host_of(rt)
        await call(rt, "main", "task_create", {"subject": "broken"})
        failed = host.store.list_tasks()[0]
        host.store.update_task(failed["id"], status="failed")
        hb = await call(
            rt,
            "main",
            "heartbeat_create",
            {
                "name": "failures",
                "probe_tool_name": "task_list",
                "interval_ms": 60_000,
                "probe_trigger_condition": {"contains": {"text": "[failed]"}},
                "probe_tool_params": '{"status": "failed"}',
            },
        )
        host.store.update_heartbeat(hb["task_id"], next_run=time.time() - 1)
        assert await Scheduler(host).fire_heartbeat(host.store.get_heartbeat(hb["task_id"]), time.time())
        beat = host.store.get_heartbeat(hb["task_id"])
        assert beat["last_l2_status"] == "completed" and "[failed]" in beat["last_probe_result"]
        assert reports == [{"action": "notify", "message": "a task failed", "acknowledged": True}]
        assert beat["next_run"] > time.time()


def test_trigger_conditions() -> None:
    assert triggered("always", "", None)
    assert not triggered("non_empty", "[]", None) and triggered("non_empty", "[1]", None)
    assert triggered("changed", "b", "a") and not triggered("changed", "a", "a")
    assert triggered({"greater_than": {"threshold": 2}}, "3", None)
    assert not triggered({"greater_than": {"threshold": 2}}, "not a number", None)
    assert triggered({"contains": {"text": "err"}}, "an error", None)


def test_aleph_scheduler_once_runs_what_is_due(workspace: Path) -> None:
    async def setup() -> str:
        async with runtime(workspace) as rt:
            job_id = await _job(rt, {"type": "every", "every_ms": 60_000})
            host_of(rt).store.update_cron(job_id, next_run=time.time() - 1)
            return job_id

    job_id = asyncio.run(setup())
    out = subprocess.run(
        [sys.executable, "-m", "aleph", "--config", str(workspace / "aleph.toml"), "scheduler", "--once"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**__import__("os").environ, "ALEPH_DISABLE_PLUGINS": ""},
    )
    assert out.returncode == 0, out.stderr
    assert "1 scheduled run(s)" in out.stdout

    async def check() -> list[dict[str, Any]]:
        async with runtime(workspace) as rt:
            return host_of(rt).store.schedule_runs("cron", job_id)

    runs = asyncio.run(check())
    # No runner is configured here: the run is recorded as an error saying so, never a faked success.
    assert len(runs) == 1 and runs[0]["status"] == "error" and "agent runner not available" in runs[0]["error"]
