"""A team worker process for crash tests: runs the dispatcher until every task of the store is settled.

Usage: worker.py WORKSPACE COUNTER_DB [STEP_DELAY_S]. Each task "count N" bumps a counter N times
through the chokepoint, waiting STEP_DELAY_S between steps, so a kill -9 lands mid-task.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import aleph_teams.plugin
from aleph_teams import MemberTask
from aleph_teams._service import Dispatcher

import aleph
from tests.teams.helpers import Runners


async def main(workspace: Path, db: Path, delay: float) -> int:
    async def slow_bumper(task: MemberTask) -> str:
        n = 0
        for _ in range(int(task.subject.split()[1])):
            await asyncio.sleep(delay)
            n = (await task.tools.call("counter_bump", {"name": task.task_id})).value["n"]
        return f"done {n} (attempt {task.attempt})"

    rt = aleph.load(
        workspace / "aleph.toml",
        workspace=workspace,
        plugins=[aleph_teams.plugin, Runners({"py": slow_bumper}, db)],
        entry_points=False,
        strict=True,
    )
    async with rt:
        host = rt.registry.get("team_create").tool.host  # type: ignore[union-attr]
        dispatcher = Dispatcher(host, concurrency=4)
        job = asyncio.ensure_future(dispatcher.run())
        store = host.store

        def all_settled() -> bool:
            tasks = store.list_tasks(limit=100_000)
            return bool(tasks) and all(
                t["stored_status"] in ("completed", "failed", "cancelled", "skipped") for t in tasks
            )

        await store.wait_until(all_settled, 600)
        job.cancel()
        await asyncio.gather(job, return_exceptions=True)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(Path(sys.argv[1]), Path(sys.argv[2]), float(sys.argv[3]) if len(sys.argv) > 3 else 0.01)))
