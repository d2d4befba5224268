"""What ``aleph serve`` lists is built once per listing the chokepoint hands out, and calls never list.

On the 2026-07-28 HTTP era the SDK checks each ``tools/call``'s ``Mcp-Param-*`` headers against the called
tool's input schema; without a schema lookup it ran the whole ``tools/list`` handler before every call (7 ms
at 140 tools, 2.4x the SDK's own server). These tests hold the lookup and the kept listing to what a client
is offered: the same tools, changed as soon as the registry or the caller's policy changes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from mcp import Client

import aleph
from aleph._mcp.serve import AlephMcpServer, bind_loopback
from aleph.testing import isolated_runtime

pytestmark = pytest.mark.anyio


async def echo_text(text: str) -> str:
    """Echo."""
    return text


async def shout(text: str, times: int = 1) -> str:
    """Shout."""
    return text.upper() * times


def _register(rt: aleph.Aleph) -> None:
    rt.registry.register(aleph.tool(name="echo_text", description="Echo a text.", idempotent=True)(echo_text))


@asynccontextmanager
async def serving(server: AlephMcpServer) -> AsyncIterator[str]:
    sock = bind_loopback("127.0.0.1", 0)
    started = anyio.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: server.run_http(sock, ready=lambda _port: started.set()))
        with anyio.fail_after(30):
            await started.wait()
        try:
            yield f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
        finally:
            tg.cancel_scope.cancel()
    sock.close()


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_calls_over_http_do_not_run_the_tools_listing(workspace: Path, mode: str) -> None:
    async with isolated_runtime(workspace) as rt:
        _register(rt)
        server = AlephMcpServer(rt)
        listings: list[int] = []
        build = server.tools.listing

        def counted(defs: object) -> object:
            listings.append(1)
            return build(defs)  # type: ignore[arg-type]

        server.tools.listing = counted  # type: ignore[method-assign]
        async with serving(server) as url, Client(url, mode=mode) as client:
            first = await client.call_tool("echo_text", {"text": "x"})
            before = len(listings)  # a client may list once for itself
            for i in range(20):
                result = await client.call_tool("echo_text", {"text": f"call {i}"})
                assert not result.is_error and result.content[0].text == f"call {i}"  # type: ignore[union-attr]
            assert len(listings) == before, "a tools/call ran the tools/list handler"
            assert not first.is_error
            listed = await client.list_tools()
            assert len(listings) == before + 1
            assert [t.name for t in listed.tools] == ["echo_text"]


async def test_the_kept_listing_follows_the_registry_and_the_schema_lookup_follows_the_listing(
    workspace: Path,
) -> None:
    async with isolated_runtime(workspace, config_toml='[policies.tool_permissions.overrides]\nshout = "deny"\n') as rt:
        _register(rt)
        server = AlephMcpServer(rt)
        service = server._service(rt=rt)
        first = server.tools.listing(await service.list())
        assert server.tools.listing(await service.list()) is first  # nothing changed: not built again
        schema = server._input_schema("echo_text")
        assert schema is not None and schema == first.tools[0].input_schema
        assert schema["required"] == ["text"]
        assert server._input_schema("no_such_tool") is None

        rt.registry.register(aleph.tool(name="shout", description="Shout (denied here).")(shout))
        rt.registry.register(aleph.tool(name="echo_twice", description="Echo.", idempotent=True)(echo_text))
        again = server.tools.listing(await server._service(rt=rt).list())
        assert again is not first
        assert [t.name for t in again.tools] == ["echo_text", "echo_twice"]  # the denied tool is not offered
        assert server._input_schema("echo_twice") is not None
        assert server._input_schema("shout") is None  # denied: not offered, so not looked up either
