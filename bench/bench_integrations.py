"""Per-call cost of a tool call through each framework integration, against that framework's native tool.

Run: python bench/bench_integrations.py   (needs aleph-core[pydantic-ai,openai-agents,langchain] and llm-aleph)
Target (issue 20): through the integration <= 1.2x the framework's own native function tool, plus the
chokepoint's own overhead, all measured in this run. No model is called: each framework's tool-dispatch
entry point is timed directly (pydantic-ai ``call_tool``, the Agents SDK ``on_invoke_tool``, LangChain
``ainvoke``, llm's tool implementation), with the same async ``add`` tool behind every one.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from _util import per_call_us

import aleph

N = 5_000


async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def sync_add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


ARGS = {"a": 2, "b": 3}


async def measure(rt: aleph.Aleph) -> dict[str, tuple[float, float]]:
    service = rt.tool_service(agent="bench", turn=aleph.TurnContext(session_key="s"))
    out: dict[str, tuple[float, float]] = {}

    # pydantic-ai: the toolset's call_tool, ours vs a FunctionToolset over the same function.
    from pydantic_ai import RunContext
    from pydantic_ai.models.test import TestModel
    from pydantic_ai.toolsets import FunctionToolset
    from pydantic_ai.usage import RunUsage

    from aleph.integrations.pydantic_ai import AlephToolset

    ctx: Any = RunContext(deps=None, model=TestModel(), usage=RunUsage(), tool_call_id="c1", conversation_id="s")
    native_set = FunctionToolset([add])
    native_tool = (await native_set.get_tools(ctx))["add"]
    ours_set = AlephToolset(service)
    ours_tool = (await ours_set.get_tools(ctx))["add"]
    out["pydantic-ai"] = (
        await _us(lambda: native_set.call_tool("add", ARGS, ctx, native_tool)),
        await _us(lambda: ours_set.call_tool("add", ARGS, ctx, ours_tool)),
    )

    # OpenAI Agents SDK: on_invoke_tool, ours vs @function_tool over the same function.
    from agents import function_tool
    from agents.tool_context import ToolContext

    from aleph.integrations.openai_agents import AlephAgentTools

    raw = json.dumps(ARGS)
    tctx: Any = ToolContext(context=None, tool_name="add", tool_call_id="c1", tool_arguments=raw)
    native_fn = function_tool(add)
    [ours_fn] = [t for t in await AlephAgentTools(service).tools() if t.name == "add"]
    out["openai-agents"] = (
        await _us(lambda: native_fn.on_invoke_tool(tctx, raw)),
        await _us(lambda: ours_fn.on_invoke_tool(tctx, raw)),
    )

    # LangChain: ainvoke with a tool call, ours vs StructuredTool over the same coroutine.
    from langchain_core.tools import StructuredTool

    from aleph.integrations.langchain import langchain_tools

    call = {"name": "add", "args": ARGS, "id": "c1", "type": "tool_call"}
    native_lc = StructuredTool.from_function(coroutine=add, name="add", description="Add two integers.")
    [ours_lc] = [t for t in await langchain_tools(service) if t.name == "add"]
    out["langchain"] = (await _us(lambda: native_lc.ainvoke(call)), await _us(lambda: ours_lc.ainvoke(call)))
    return out


async def _us(fn: Any, n: int = N) -> float:
    for _ in range(200):
        await fn()
    best = float("inf")
    for _ in range(5):
        start = asyncio.get_running_loop().time()
        for _ in range(n):
            await fn()
        best = min(best, (asyncio.get_running_loop().time() - start) / n * 1e6)
    return best


def llm_figures(workspace: Path) -> tuple[float, float]:
    """llm runs tools synchronously: llm.Tool over a plain function vs the Aleph toolbox (a thread hop to Aleph)."""
    import llm
    from llm_aleph import Aleph

    native = llm.Tool.function(sync_add, name="add")
    box = Aleph(workspace=str(workspace), agent="bench", session="s")
    try:
        [ours] = [t for t in box.tools() if t.name == "text_stats"]
        tc = llm.ToolCall(name="text_stats", arguments={"text": "a b"}, tool_call_id="c1")
        ours_us = per_call_us(lambda: ours.implementation(llm_tool_call=tc, text="a b"), 2_000)
    finally:
        box.close()
    return per_call_us(lambda: native.implementation(**ARGS), 20_000), ours_us


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        (ws / "aleph.toml").write_text('[policies.tool_permissions.overrides]\nadd = "allow"\n')
        os.chdir(ws)
        rt = aleph.load(workspace=ws)
        rt.register(aleph.tool(name="add", description="Add two integers.", idempotent=True)(add))

        async def run() -> tuple[dict[str, tuple[float, float]], float, float]:
            async with rt:
                service = rt.tool_service(agent="bench", turn=aleph.TurnContext(session_key="s"))
                bare = aleph.UnscopedToolService(rt.registry)
                figures = await measure(rt)
                bare_us = await _us(lambda: bare.execute("add", ARGS))
                return figures, bare_us, await _us(lambda: service.execute("add", ARGS))

        figures, bare_us, scoped_us = asyncio.run(run())
        overhead = scoped_us - bare_us
        print(f"chokepoint: registry-only {bare_us:.1f} µs, scoped {scoped_us:.1f} µs, overhead {overhead:.1f} µs")
        print(f"{'framework':<15} {'native µs':>10} {'aleph µs':>10} {'budget µs':>10} {'ratio':>7}")
        print("  (budget = 1.2 x native + the chokepoint's overhead; ratio = aleph / budget, target <= 1)")
        figures["llm (sync, via a thread hop)"] = llm_figures(ws)
        for name, (native, ours) in figures.items():
            budget = 1.2 * native + overhead
            verdict = "met" if ours <= budget else "MISSED"
            print(f"{name:<15} {native:>10.1f} {ours:>10.1f} {budget:>10.1f} {ours / budget:>7.2f}  {verdict}")


if __name__ == "__main__":
    main()
