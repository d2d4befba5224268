"""A mutating call cancelled while it runs still gets its ledger row.

A call whose task is cancelled (an MCP client's ``notifications/cancelled``, a framework's timeout, a
host that gives up) may already have had its effect: an async tool wrote before it awaited, a sync tool
goes on in its worker thread. Before, such a call left no row at all, so starting a mutating call and
cancelling it at once did something with no trace in the signed ledger. The runtime, its ledger and the
tools are real; the test cancels the task that awaits the call once the effect is visible.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

import aleph

pytestmark = pytest.mark.anyio

released = threading.Event()


@aleph.tool(name="deploy_async", description="Deploy (async).")
async def deploy_async(target: str, marker: str) -> str:
    Path(marker).write_text(target)  # the effect, before the first await
    await asyncio.sleep(60)
    return "done"


@aleph.tool(name="deploy_thread", description="Deploy (sync, in a worker thread).")
def deploy_thread(target: str, marker: str) -> str:
    Path(marker).write_text(target)
    released.wait(60)  # the thread goes on after the awaiting task is cancelled
    return "done"


@aleph.tool(name="peek", description="Look (read-only).", idempotent=True)
async def peek(marker: str) -> str:
    Path(marker).write_text("looked")
    await asyncio.sleep(60)
    return "seen"


async def cancelled_rows(workspace: Path, tool: str) -> list[aleph.LedgerRow]:
    path = workspace / "aleph.toml"
    path.write_text("[workspace]\ndata_dir = '.d'\n")
    marker = workspace / f"{tool}.effect"
    async with aleph.load(path, entry_points=False) as rt:
        for t in (deploy_async, deploy_thread, peek):
            rt.register(t)
        arguments = {"marker": str(marker)} | ({} if tool == "peek" else {"target": "prod"})
        task = asyncio.ensure_future(rt.tool_service(agent="ops").call(tool, arguments))
        while not marker.exists():
            await asyncio.sleep(0.005)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        released.set()
        ledger = rt.chokepoint.ledger
        assert ledger is not None
        await ledger.flush()
        if "ops" not in ledger.agents():  # no row was ever written for the agent
            return []
        assert ledger.verify("ops").ok
        return [r for r in ledger.rows("ops") if r.action == "tool_call"]


@pytest.mark.parametrize("tool", ["deploy_async", "deploy_thread"])
async def test_a_mutating_call_cancelled_after_its_effect_is_recorded(workspace: Path, tool: str) -> None:
    released.clear()
    rows = await cancelled_rows(workspace, tool)
    assert [(tool, "error")] == [(r.target, r.outcome) for r in rows]
    assert "cancelled while it ran" in rows[0].detail and "target=prod" in rows[0].detail


async def test_a_cancelled_read_only_call_stays_unrecorded_like_any_read(workspace: Path) -> None:
    assert [] == await cancelled_rows(workspace, "peek")
