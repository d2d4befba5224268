"""One writer process of the concurrency test/bench: N remembers through a real runtime's chokepoint."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import aleph_memory.plugin

import aleph


async def main(config: Path, worker: int, count: int, shared: int) -> None:
    rt = aleph.load(config, workspace=config.parent, plugins=[aleph_memory.plugin], entry_points=False, strict=True)
    async with rt:
        for i in range(count):
            turn = aleph.TurnContext(session_key=f"w{worker}", run_id=f"w{worker}", call_id=f"w{worker}-{i}")
            service = rt.tool_service(agent="crowd", turn=turn)
            # Every worker also tries the same `shared` facts: exactly one copy of each may land.
            content = f"shared fact number {i}" if i < shared else f"worker {worker} fact number {i}"
            await service.execute("remember", {"action": "add", "content": content})


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])))
