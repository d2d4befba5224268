"""``aleph serve --http`` answers only requests addressed to its own loopback name (DNS rebinding).

A web page can make a browser send requests to a loopback server under the page's own name (its DNS
re-pointed at 127.x): the server must refuse a ``Host`` or ``Origin`` that is not its own, on every
loopback address it may bind, not only on 127.0.0.1. The server runs in this process (the real SDK app
under uvicorn on a loopback socket); requests are raw ``httpx2`` posts, and a legitimate client is the
SDK's own ``Client``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

import aleph
from aleph._mcp.serve import AlephMcpServer, bind_loopback

pytestmark = pytest.mark.anyio

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "page", "version": "1"}},
}
ACCEPT = {"Accept": "application/json, text/event-stream"}


@asynccontextmanager
async def serving(workspace: Path, host: str) -> AsyncIterator[tuple[str, int]]:
    import aleph_example.plugin

    (workspace / "aleph.toml").write_text("")
    rt = aleph.load(workspace / "aleph.toml", workspace=workspace, plugins=[aleph_example.plugin], entry_points=False)
    sock = bind_loopback(host, 0)
    port = sock.getsockname()[1]
    started = anyio.Event()
    async with rt, anyio.create_task_group() as tg:
        server = AlephMcpServer(rt)
        tg.start_soon(lambda: server.run_http(sock, ready=lambda _port: started.set()))
        with anyio.fail_after(30):
            await started.wait()
        try:
            yield host, port
        finally:
            tg.cancel_scope.cancel()
    sock.close()


# 127.0.0.2 is loopback on Linux without any set-up; the SDK protected only 127.0.0.1, localhost and ::1.
@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2"])
@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({"Host": "attacker.example:{port}", "Origin": "http://attacker.example:{port}"}, 421),
        ({"Host": "attacker.example"}, 421),
        ({"Origin": "http://attacker.example"}, 403),
        ({"Origin": "null"}, 403),
        ({"Origin": "http://localhost.attacker.example:{port}"}, 403),
    ],
)
async def test_a_request_for_another_name_is_refused_on_every_loopback_address(
    workspace: Path, host: str, headers: dict[str, str], status: int
) -> None:
    async with serving(workspace, host) as (bound, port), httpx2.AsyncClient(timeout=30) as http:
        sent = {k: v.format(port=port) for k, v in headers.items()}
        response = await http.post(f"http://{bound}:{port}/mcp", json=INITIALIZE, headers={**ACCEPT, **sent})
        assert status == response.status_code, response.text
        # The server answers its own name on the same address.
        own = await http.post(f"http://{bound}:{port}/mcp", json=INITIALIZE, headers=ACCEPT)
        assert 200 == own.status_code, own.text


async def test_a_client_of_a_server_on_another_loopback_address_lists_and_calls(workspace: Path) -> None:
    async with serving(workspace, "127.0.0.2") as (bound, port), httpx2.AsyncClient(timeout=30) as http:
        async with Client(streamable_http_client(f"http://{bound}:{port}/mcp", http_client=http)) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert "text_stats" in names
            result = await client.call_tool("text_stats", {"text": "one two"})
            assert not result.is_error
