"""MCP figures: Aleph's per-call overhead over the bare SDK client, and concurrent connect time.

1. Median wall time of ``echo`` on ``@modelcontextprotocol/server-everything`` over stdio, called N times
   through ``UnscopedToolService`` (registry → LoopTool validation → ServerConnection → SDK) and N times
   with ``client.call_tool`` on the same connection, interleaved so both see the same machine load.
   Target: overhead <= 10 %.
2. Connecting 5 stdio servers concurrently through ``McpManager.start()`` against the slowest of 5
   single connects measured one by one in the same run. Target: < 1.5x.

Run: ``.venv/bin/python bench/bench_mcp.py [--calls N]`` (needs the npm peers from scripts/setup-system).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio

from aleph import ToolRegistry, UnscopedToolService
from aleph._config import McpConfig, McpServerConfig
from aleph._mcp import McpManager

EVERYTHING = (
    Path(__file__).resolve().parent.parent / "tests" / "npm" / "node_modules" / ".bin" / "mcp-server-everything"
)


def server() -> McpServerConfig:
    return McpServerConfig(command=str(EVERYTHING), args=["stdio"])


async def overhead(calls: int, data: Path) -> tuple[float, float]:
    registry = ToolRegistry()
    manager = McpManager(McpConfig(servers={"ev": server()}), registry, data)
    await manager.start()
    try:
        service = UnscopedToolService(registry)
        conn = manager.server("ev")
        assert conn is not None and conn.client is not None
        client = conn.client
        for _ in range(50):  # warm both paths
            await service.execute("ev__echo", {"message": "warm"})
            await client.call_tool("echo", {"message": "warm"})
        aleph_ms: list[float] = []
        sdk_ms: list[float] = []
        for i in range(calls):
            start = time.perf_counter()
            await service.execute("ev__echo", {"message": f"m{i}"})
            aleph_ms.append((time.perf_counter() - start) * 1000)
            start = time.perf_counter()
            await client.call_tool("echo", {"message": f"m{i}"})
            sdk_ms.append((time.perf_counter() - start) * 1000)
        return statistics.median(aleph_ms), statistics.median(sdk_ms)
    finally:
        await manager.aclose()


async def connect_time(servers: dict[str, McpServerConfig], data: Path) -> float:
    manager = McpManager(McpConfig(servers=servers), ToolRegistry(), data)
    start = time.perf_counter()
    await manager.start()
    elapsed = time.perf_counter() - start
    states = {s.state for s in manager.servers()}
    await manager.aclose()
    if states != {"connected"}:
        sys.exit(f"a server did not connect: {[(s.id, s.state, s.reason) for s in manager.servers()]}")
    return elapsed


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


async def main(calls: int) -> None:
    if not EVERYTHING.exists():
        sys.exit("mcp-server-everything not installed: run scripts/setup-system")
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        aleph_ms, sdk_ms = await overhead(calls, data)
        ratio = aleph_ms / sdk_ms
        print(f"echo over stdio, median of {calls} calls:")
        print(f"  bare SDK client.call_tool      {sdk_ms:7.3f} ms")
        print(f"  Aleph UnscopedToolService      {aleph_ms:7.3f} ms")
        print(f"  overhead                       {(ratio - 1) * 100:+6.1f} %   (target <= +10 %)")

        singles = [await connect_time({f"s{i}": server()}, data) for i in range(5)]
        before = _children_cpu()
        together = await connect_time({f"s{i}": server() for i in range(5)}, data)
        cpu = _children_cpu() - before
        slowest = max(singles)
        floor = cpu / (os.cpu_count() or 1)
        print("connect + first listing, stdio server-everything:")
        print(f"  single connects                {', '.join(f'{s * 1000:.0f}' for s in singles)} ms")
        sequential = sum(singles) * 1000
        print(f"  5 concurrently                 {together * 1000:7.0f} ms   (one after another: {sequential:.0f} ms)")
        print(f"  ratio to the slowest single    {together / slowest:7.2f}x  (target < 1.5x)")
        # Starting node costs CPU; with few cores the concurrent connect cannot beat CPU time / cores.
        cores = os.cpu_count()
        print(
            f"  server CPU for the 5 starts    {cpu * 1000:7.0f} ms   → floor on {cores} cores: {floor * 1000:.0f} ms"
        )
        print(f"  load average now               {os.getloadavg()[0]:7.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500, help="calls per path (default 500)")
    anyio.run(main, parser.parse_args().calls)
