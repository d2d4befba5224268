"""An MCP client that cancels a mutating call through ``aleph serve`` does not erase it from the ledger.

The client starts a call, waits until the tool's effect is visible, then cancels its request (the SDK
sends ``notifications/cancelled`` on the legacy era; on 2026-07-28 the POST is dropped): the server cancels
the tool, and before, the call then had no ledger row at all. The server runs in this process (the real
SDK app under uvicorn on a loopback socket); the client is the SDK's own ``Client``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

import aleph
from aleph._mcp.serve import AlephMcpServer, bind_loopback

pytestmark = pytest.mark.anyio


def deploy_tool(marker: Path) -> aleph.AlephTool:  # type: ignore[type-arg]
    @aleph.tool(name="deploy", description="Deploy to a target.")
    async def deploy(target: str) -> str:
        marker.write_text(target)  # the effect happens before the call could answer
        await asyncio.sleep(60)
        return "done"

    return deploy


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_call_the_client_cancels_after_its_effect_keeps_its_ledger_row(workspace: Path, mode: str) -> None:
    (workspace / "aleph.toml").write_text("[workspace]\ndata_dir = '.d'\n")
    marker = workspace / "deployed"
    rt = aleph.load(workspace / "aleph.toml", workspace=workspace, entry_points=False)
    sock = bind_loopback("127.0.0.1", 0)
    port = sock.getsockname()[1]
    started = anyio.Event()
    async with rt, anyio.create_task_group() as tg:
        rt.register(deploy_tool(marker))
        server = AlephMcpServer(rt)
        tg.start_soon(lambda: server.run_http(sock, ready=lambda _port: started.set()))
        with anyio.fail_after(30):
            await started.wait()
        ledger = rt.chokepoint.ledger
        assert ledger is not None
        async with httpx2.AsyncClient(timeout=30) as http:
            transport = streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http)
            async with Client(transport, mode=mode) as client, anyio.create_task_group() as calls:
                calls.start_soon(client.call_tool, "deploy", {"target": "prod"})
                with anyio.fail_after(30):
                    while not marker.exists():
                        await anyio.sleep(0.01)
                calls.cancel_scope.cancel()
            with anyio.fail_after(30):  # the server notices the cancellation and records the call
                while not any(r.target == "deploy" for r in ledger.rows("default")):
                    await ledger.flush()
                    await anyio.sleep(0.02)
        tg.cancel_scope.cancel()
    sock.close()
    rows = [r for r in ledger.rows("default") if r.action == "tool_call"]
    assert [("deploy", "error")] == [(r.target, r.outcome) for r in rows]
    assert "cancelled while it ran" in rows[0].detail
    assert ledger.verify("default").ok
