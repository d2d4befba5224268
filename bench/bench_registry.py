"""Per-call overhead of ``execute`` through the registry (validation included) vs a direct Python call.

Run: python bench/bench_registry.py [N]
Targets (issue 2): validated async call <= 15 µs, cheap sync tool declared inline <= 15 µs.
"""

from __future__ import annotations

import asyncio
import sys

from _util import per_call_us, per_call_us_async

import aleph

N = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000


def add(a: int, b: int) -> int:
    return a + b


async def add_async(a: int, b: int) -> int:
    return a + b


def main() -> None:
    registry = aleph.ToolRegistry()
    registry.register(aleph.tool(name="add_sync", description="Add two integers.", inline=True)(add))
    registry.register(aleph.tool(name="add_async", description="Add two integers.")(add_async))
    service = aleph.UnscopedToolService(registry)
    payload = {"a": 2, "b": 3}
    assert asyncio.run(service.execute("add_sync", payload)).value == 5

    direct = per_call_us(lambda: add(2, 3), N)
    direct_async = per_call_us_async(lambda: add_async(2, 3), N)
    sync_us = per_call_us_async(lambda: service.execute("add_sync", payload), N)
    async_us = per_call_us_async(lambda: service.execute("add_async", payload), N)
    print(f"calls per measurement: {N}")
    print(f"direct sync call              {direct:8.3f} µs")
    print(f"direct async call (awaited)   {direct_async:8.3f} µs")
    print(
        f"execute, inline sync tool     {sync_us:8.3f} µs  overhead {sync_us - direct:7.3f} µs  "
        f"ratio {sync_us / direct:6.1f}x  (target <= 15 µs)"
    )
    print(
        f"execute, async tool           {async_us:8.3f} µs  overhead {async_us - direct_async:7.3f} µs  "
        f"ratio {async_us / direct_async:6.1f}x  (target <= 15 µs)"
    )


if __name__ == "__main__":
    main()
