"""Exactly once across crashes: worker processes killed with SIGKILL mid-task repeat no side effect."""

from __future__ import annotations

import asyncio
import random
import subprocess
import sys
from pathlib import Path

from aleph_teams import MemberTask

from .helpers import Runners, counter, kill_mid_task, runtime

WORKER = str(Path(__file__).parent / "agents" / "worker.py")
STEPS = 5


async def _setup(workspace: Path, db: Path, tasks: int) -> list[str]:
    async with runtime(workspace, Runners({}, db)) as rt:
        svc = rt.tool_service(agent="lead")
        team = (
            await svc.execute("team_create", {"name": "crash", "members": [{"agent_id": "w1", "runner": "py"}]})
        ).value
        ids = []
        for _ in range(tasks):
            made = await svc.execute(
                "task_create", {"subject": f"count {STEPS}", "team_id": team["team_id"], "owner": "w1"}
            )
            ids.append(made.value["task_id"])
        return ids


async def _statuses(workspace: Path, db: Path, ids: list[str]) -> dict[str, str]:
    async with runtime(workspace, Runners({}, db)) as rt:
        out = await rt.tool_service(agent="lead").execute("task_wait", {"task_ids": ids, "timeout_seconds": 1})
        return {i: "completed" for i in out.value["completed"]} | {i: "failed" for i in out.value["failed"]}


def _abandoned(workspace: Path, db: Path, ids: list[str]) -> int:
    async def count() -> int:
        async with runtime(workspace, Runners({}, db)) as rt:
            host = rt.registry.get("team_create").tool.host  # type: ignore[union-attr]
            return sum(1 for i in ids for r in host.store.runs(i) if r["status"] == "abandoned")

    return asyncio.run(count())


def test_kill_9_of_workers_mid_task_repeats_no_side_effect_and_every_task_finishes(workspace: Path) -> None:
    db = workspace / "counter.db"
    ids = asyncio.run(_setup(workspace, db, tasks=6))
    rng = random.Random(7)
    kills = 0
    while kills < 5:
        proc = subprocess.Popen([sys.executable, WORKER, str(workspace), str(db), "0.03"])
        if not kill_mid_task(proc, db, rng):
            break
        kills += 1
    else:
        proc = subprocess.Popen([sys.executable, WORKER, str(workspace), str(db), "0.03"])
    assert proc.wait(timeout=120) == 0
    assert kills == 5
    assert _abandoned(workspace, db, ids) >= kills  # each kill cut at least one run off mid-task
    assert asyncio.run(_statuses(workspace, db, ids)) == dict.fromkeys(ids, "completed")
    assert [counter(db, i) for i in ids] == [STEPS] * len(ids)


def test_a_resumed_run_replays_finished_steps_from_the_result_store(workspace: Path) -> None:
    """A run that fails after two steps is run again from step 1: steps 1-2 answer from the store."""
    db = workspace / "counter.db"
    seen: list[tuple[int, bool]] = []

    async def flaky(task: MemberTask) -> str:
        for step in range(1, 4):
            out = await task.tools.call("counter_bump", {"name": task.task_id})
            seen.append((task.attempt, bool(out.metadata.get("replayed"))))
            if task.attempt == 1 and step == 2:
                raise RuntimeError("worker lost")
        return "ok"

    async def run() -> None:
        async with runtime(workspace, Runners({"py": flaky}, db)) as rt:
            svc = rt.tool_service(agent="lead")
            team = (
                await svc.execute("team_create", {"name": "t", "members": [{"agent_id": "w1", "runner": "py"}]})
            ).value
            first = (
                await svc.execute("team_delegate", {"team_id": team["team_id"], "agent_id": "w1", "task": "x"})
            ).value
            assert first["status"] == "failed" and "worker lost" in first["error"]
            await svc.execute("task_update", {"task_id": first["task_id"], "status": "pending"})
            host = rt.registry.get("team_create").tool.host  # type: ignore[union-attr]
            again = await host.run_task(first["task_id"], timeout_seconds=30)
            assert again.status == "completed"
            assert counter(db, first["task_id"]) == 3

    asyncio.run(run())
    assert seen == [(1, False), (1, False), (2, True), (2, True), (2, False)]
