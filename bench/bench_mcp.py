"""MCP figures: Aleph's per-call overhead over the bare SDK client, and concurrent connect time.

1. Median wall time of ``echo`` on ``@modelcontextprotocol/server-everything`` over stdio, called N times
   through ``UnscopedToolService`` (registry → LoopTool validation → ServerConnection → SDK), N times
   through the full chokepoint ``rt.tool_service(tier="full")`` (what users get) and N times with
   ``client.call_tool`` on the same connection, interleaved so all three see the same machine load.
   The ledger is flushed after each call, untimed: the full figure is what a caller waits for, without the
   signing and fsync its ledger writer does in a thread afterwards. Target: ``UnscopedToolService``
   overhead <= 10 %.
2. Connecting 5 stdio servers concurrently through ``McpManager.start()`` against the slowest of 5
   single connects measured one by one in the same run. Target: < 1.5x.

Run: ``.venv/bin/python bench/bench_mcp.py [--calls N]`` (needs the npm peers from scripts/setup-system).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio

import aleph
from aleph import ToolRegistry, UnscopedToolService
from aleph._config import McpConfig, McpServerConfig
from aleph._mcp import McpManager

EVERYTHING = (
    Path(__file__).resolve().parent.parent / "tests" / "npm" / "node_modules" / ".bin" / "mcp-server-everything"
)


def server() -> McpServerConfig:
    return McpServerConfig(command=str(EVERYTHING), args=["stdio"])


async def overhead(calls: int, data: Path) -> tuple[float, float, float]:
    """Medians (ms) of ``echo`` through UnscopedToolService, the full chokepoint, and the bare SDK client."""
    config = data / "aleph.toml"
    config.write_text(
        f'[mcp.servers.ev]\ncommand = {json.dumps(str(EVERYTHING))}\nargs = ["stdio"]\n'
        f"[workspace]\ndata_dir = {json.dumps(str(data / 'data'))}\n"
    )
    async with aleph.load(config, workspace=data, entry_points=False) as rt:
        unscoped = UnscopedToolService(rt.registry)
        full = rt.tool_service(tier="full")
        conn = rt.mcp.server("ev")
        assert conn is not None and conn.client is not None
        client = conn.client

        ledger = rt.chokepoint.ledger

        async def via_full(message: str) -> None:
            result = await full.call("ev__echo", {"message": message})
            if not result.success:
                sys.exit(f"the full chokepoint refused echo: {result.to_json()}")

        async def settle() -> None:
            # The ledger signs and writes a full-chokepoint call in a thread after the call returns;
            # left running, it would slow whichever call comes next (of any path) and dilute the ratios.
            if ledger is not None:
                await ledger.flush()

        for _ in range(50):  # warm every path
            await unscoped.execute("ev__echo", {"message": "warm"})
            await via_full("warm")
            await client.call_tool("echo", {"message": "warm"})
        paths = {
            "unscoped": lambda m: unscoped.execute("ev__echo", {"message": m}),
            "full": via_full,
            "sdk": lambda m: client.call_tool("echo", {"message": m}),
        }
        times: dict[str, list[float]] = {name: [] for name in paths}
        order = list(paths)
        shuffle = random.Random(0).shuffle
        for i in range(calls):
            # Interleaved, so all three paths see the same machine load, in a random order per round so
            # that no path always follows the same other one.
            shuffle(order)
            for name in order:
                start = time.perf_counter()
                await paths[name](f"m{i}")
                times[name].append((time.perf_counter() - start) * 1000)
                await settle()
        unscoped_ms, full_ms, sdk_ms = (statistics.median(times[name]) for name in ("unscoped", "full", "sdk"))
        return unscoped_ms, full_ms, sdk_ms


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
        unscoped_ms, full_ms, sdk_ms = await overhead(calls, data)
        print(f"echo over stdio, median of {calls} calls per path (interleaved):")
        print(f"  bare SDK client.call_tool      {sdk_ms:7.3f} ms")
        print(
            f"  Aleph UnscopedToolService      {unscoped_ms:7.3f} ms   "
            f"{(unscoped_ms / sdk_ms - 1) * 100:+6.1f} %   (target <= +10 %)"
        )
        print(f"  rt.tool_service(tier='full')   {full_ms:7.3f} ms   {(full_ms / sdk_ms - 1) * 100:+6.1f} %")

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
