"""The chokepoint's cost as a curve: per-call µs at 10 / 100 / 1,000 / 10,000 tools, name rules, argument
rules and per-request rules, plus registering and first listing 10,000 tools.

Run: python bench/bench_scale.py [CALLS]
Targets (issue 34): flat curves; a per-request layer of 1,000 rules <= 0.5 ms; 1,000 argument rules with 10
naming the called tool <= 20 µs a call; registering 10,000 tools <= 0.5 s and listing them first <= 20 ms.
Each row prints the plain registry call measured in the same run as its baseline; per-call figures are
CPU time of this process (a shared machine's waits for a core are not counted), registration wall time.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path

from _util import alternating_us_async, per_call_us

import aleph
from aleph._chokepoint._layers import AccessControl
from aleph._chokepoint._permissions import PermissionLayer, PermissionPolicy
from aleph._chokepoint._scoped import Chokepoint, ScopedToolService

CALLS = int(sys.argv[1]) if len(sys.argv) > 1 else 5_000
SIZES = (10, 100, 1_000, 10_000)
PAYLOAD = {"a": 2, "b": 3}


async def add(a: int, b: int) -> int:
    return a + b


def registry_with(n: int) -> aleph.ToolRegistry:
    reg = aleph.ToolRegistry()
    reg.register(aleph.tool(name="add_async", description="Add two integers.", idempotent=True)(add))
    template = aleph.tool(name="filler", description="Filler tool.", idempotent=True)(add)
    for i in range(n - 1):
        reg.register(_renamed(template, f"filler_{i:05d}"))
    return reg


def _renamed(template: aleph.AlephTool, name: str) -> aleph.AlephTool:
    cls = type(f"{name}_tool", (type(template),), {"NAME": name})
    return cls()


def policy_of(rules: dict[str, str]) -> PermissionPolicy:
    return PermissionPolicy([PermissionLayer.from_config("global", {"default": "allow", "overrides": rules})])


def scoped(reg: aleph.ToolRegistry, policy: PermissionPolicy) -> ScopedToolService:
    return ScopedToolService(Chokepoint(reg), policy=policy, agent="bench", turn=aleph.TurnContext(session_key="s"))


def call_us(svc: aleph.ToolService, base: aleph.ToolService | None = None) -> tuple[float, float]:
    """(measured, baseline) µs per call, timed in turns; the baseline is ``base`` or a plain registry call."""
    if base is None:
        base = aleph.UnscopedToolService(registry_with(10))
    assert asyncio.run(svc.execute("add_async", PAYLOAD)).value == 5
    measured, baseline = alternating_us_async(
        [lambda: svc.execute("add_async", PAYLOAD), lambda: base.execute("add_async", PAYLOAD)], CALLS, cpu=True
    )
    return measured, baseline


def row(label: str, n: int, measured: float, base: float, note: str = "") -> None:
    print(f"  {label:16s} {n:6d}   {measured:9.2f} µs   baseline {base:7.2f} µs   {measured / base:5.2f}x  {note}")


def main() -> None:
    small = registry_with(10)
    print(f"per call (CPU µs), add_async through the full chokepoint ({CALLS} calls); baseline: registry only")
    for n in SIZES:
        reg = registry_with(n)
        row("tools", n, *call_us(scoped(reg, PermissionPolicy([])), aleph.UnscopedToolService(reg)))
    for n in SIZES:
        rules = {f"filler_{i:05d}": "deny" for i in range(n // 2)} | {f"team_{i}_*": "ask" for i in range(n // 2)}
        row("name rules", n, *call_us(scoped(small, policy_of(rules))))
    for n in SIZES:
        own = {f"add_async(b={100 + i})": "deny" for i in range(min(10, n))}
        others = {f"filler_{i:05d}(b={i})": "deny" for i in range(n - len(own))}
        us, base = call_us(scoped(small, policy_of(own | others)))
        row("argument rules", n, us, base, "(10 name the tool; target <= 20 µs at 1,000)" if n == 1_000 else "")

    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "aleph.toml").write_text("")
        access = AccessControl(aleph.load_config(workspace=tmp, user_file=False))
        chokepoint = Chokepoint(small)
        print("per request, a gateway's channel_permissions= layer (parse or cache hit) plus one call")
        for n in SIZES:
            table = {"default": "allow", "overrides": {f"tool_{i}(path:src/{i}/**)": "deny" for i in range(n)}}
            start = time.process_time()
            access.policy("bench", "gw", table)
            first_ms = (time.process_time() - start) * 1e3
            again_ms = per_call_us(lambda t=table: access.policy("bench", "gw", t), 200) / 1e3  # type: ignore[misc]
            svc = ScopedToolService(chokepoint, policy=access.policy("bench", "gw", table), agent="bench")
            us, _ = call_us(svc)
            note = "(target <= 0.5 ms at 1,000)" if n == 1_000 else ""
            print(
                f"  request rules    {n:6d}   first {first_ms:8.2f} ms   again {again_ms:7.3f} ms"
                f"   call {us:6.2f} µs  {note}"
            )

    registration()


def registration() -> None:
    """Ten thousand typed tools and ten thousand MCP-shaped ones: decorate, register, list, then build."""
    start = time.process_time()
    tools = [aleph.tool(name=f"t_{i:05d}", description=f"Tool {i}.", idempotent=True)(add) for i in range(10_000)]
    made = time.process_time() - start
    reg = aleph.ToolRegistry()
    start = time.process_time()
    for t in tools:
        reg.register(t)
    registered = time.process_time() - start
    start = time.process_time()
    listed = reg.definitions()
    first_list = time.process_time() - start
    assert len(listed) == 10_000
    start = time.process_time()
    scoped_list = asyncio.run(scoped(reg, PermissionPolicy([])).list())
    service_list = time.process_time() - start
    assert len(scoped_list) == 10_000
    start = time.process_time()
    for d in listed:
        d.input_schema  # noqa: B018 - reading it builds it
    schemas = time.process_time() - start
    schema = {"type": "object", "properties": {"q": {"type": "string", "description": "Query."}}, "required": ["q"]}
    start = time.process_time()
    mcp = aleph.ToolRegistry()
    for i in range(10_000):
        mcp.register(aleph.LoopTool(f"srv__q_{i:05d}", f"Query {i}.", schema), source=aleph.ToolSource.mcp("srv"))
    loop_tools = time.process_time() - start
    print("10,000 tools")
    print(f"  @aleph.tool (decorating)          {made:7.3f} s")
    print(f"  registering                       {registered:7.3f} s   (target <= 0.5 s)")
    print(f"  first listing (registry)          {first_list * 1e3:7.2f} ms  (target <= 20 ms)")
    print(f"  first listing (scoped service)    {service_list * 1e3:7.2f} ms")
    print(f"  then every input schema, built    {schemas:7.3f} s   (once; a listing that sends them all pays this)")
    print(f"  10,000 MCP-shaped LoopTools       {loop_tools:7.3f} s   (constructed and registered)")


if __name__ == "__main__":
    main()
