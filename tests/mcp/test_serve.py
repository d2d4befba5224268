"""``aleph serve`` driven by a real ``mcp.Client`` over stdio and Streamable HTTP."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters

from .conftest import SERVERS, free_port

pytestmark = pytest.mark.anyio

ALEPH = str(Path(sys.executable).parent / "aleph")

DYNAMIC = f"""
[policies]
exec_tier = "full"

[mcp.servers.dyn]
command = {sys.executable!r}
args = [{str(SERVERS / "dynamic.py")!r}]
"""


def serve_params(workspace: Path, *extra: str) -> StdioServerParameters:
    env = {k: v for k, v in os.environ.items() if k.startswith(("XDG_", "ALEPH_", "HOME", "PATH"))}
    return StdioServerParameters(command=ALEPH, args=["serve", *extra], cwd=str(workspace), env=env)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_serve_lists_and_calls_over_stdio_without_any_config(workspace: Path, mode: str) -> None:
    async with Client(serve_params(workspace), mode=mode) as client:
        assert client.server_capabilities.tools is not None
        assert client.server_capabilities.tools.list_changed
        names = [t.name for t in (await client.list_tools()).tools]
        assert "text_stats" in names
        result = await client.call_tool("text_stats", {"text": "one two two"})
        assert not result.is_error
        assert '"words":3' in result.content[0].text  # type: ignore[union-attr]
        missing = await client.call_tool("no_such_tool", {})
        assert missing.is_error
        assert "tool not found: no_such_tool" in missing.content[0].text  # type: ignore[union-attr]
        bad = await client.call_tool("text_stats", {"text": 3})
        assert bad.is_error
        assert "invalid input" in bad.content[0].text  # type: ignore[union-attr]


async def test_a_denied_tool_is_hidden_and_refused(workspace: Path) -> None:
    (workspace / "aleph.toml").write_text('[policies.tool_permissions.overrides]\ntext_stats = "deny"\n')
    async with Client(serve_params(workspace), mode="legacy") as client:
        names = [t.name for t in (await client.list_tools()).tools]
        assert "text_stats" not in names
        assert "clock_now" in names
        refused = await client.call_tool("text_stats", {"text": "x"})
        assert refused.is_error


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_list_changed_reaches_the_client_when_an_mcp_server_grows(workspace: Path, mode: str) -> None:
    (workspace / "aleph.toml").write_text(DYNAMIC)
    seen = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            seen.set()

    async with Client(serve_params(workspace), mode=mode, message_handler=on_message) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        assert "dyn__stable" in names and "dyn__extra_1" not in names

        acknowledged = anyio.Event()

        async def listen() -> None:
            async with client.listen(tools_list_changed=True) as sub:  # entering waits for the server's ack
                acknowledged.set()
                async for _event in sub:
                    seen.set()
                    return

        async with anyio.create_task_group() as tg:
            if mode == "auto":
                assert "2026-07-28" == client.protocol_version
                tg.start_soon(listen)
                with anyio.fail_after(30):
                    await acknowledged.wait()
            grown = await client.call_tool("dyn__grow", {})
            assert not grown.is_error, grown.content
            with anyio.fail_after(30):
                await seen.wait()
            tg.cancel_scope.cancel()
        names = [t.name for t in (await client.list_tools()).tools]
        assert "dyn__extra_1" in names


async def test_mcp_progress_becomes_progress_notifications(workspace: Path) -> None:
    (workspace / "aleph.toml").write_text(DYNAMIC)
    messages: list[str] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        messages.append(message or "")

    async with Client(serve_params(workspace), mode="legacy") as client:
        result = await client.call_tool("dyn__slow", {"steps": 3}, progress_callback=on_progress)
        assert not result.is_error, result.content
    assert ["step 1", "step 2", "step 3"] == messages


ASKING = f"""
[mcp.servers.dyn]
command = {sys.executable!r}
args = [{str(SERVERS / "dynamic.py")!r}]
"""


@pytest.mark.parametrize(("answer", "allowed"), [("approve_once", True), ("deny", False)])
async def test_approval_is_asked_through_elicitation(workspace: Path, answer: str, allowed: bool) -> None:
    # Under the default auto tier a tool without annotations may be destructive, so the chokepoint asks.
    (workspace / "aleph.toml").write_text(ASKING)
    asked: list[str] = []

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"decision": answer})

    async with Client(serve_params(workspace), mode="legacy", elicitation_callback=elicit) as client:
        result = await client.call_tool("dyn__grow", {})
    assert allowed == (not result.is_error), result.content
    assert 1 == len(asked)
    assert "dyn__grow" in asked[0]


async def test_without_elicitation_approval_is_unavailable_and_refused(workspace: Path) -> None:
    (workspace / "aleph.toml").write_text(ASKING)
    async with Client(serve_params(workspace), mode="legacy") as client:
        result = await client.call_tool("dyn__grow", {})
    assert result.is_error
    assert "did not declare the elicitation capability" in result.content[0].text  # type: ignore[union-attr]


@pytest.fixture
def serve_http(workspace: Path) -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [ALEPH, "serve", "--http", "--port", str(port)],
        cwd=workspace,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=15)
        assert proc.stderr is not None
        proc.stderr.close()


async def test_serve_over_streamable_http_on_loopback(serve_http: str) -> None:
    port = int(serve_http.rsplit(":", 1)[1].split("/")[0])
    with anyio.fail_after(30):
        while True:
            try:
                await (await anyio.connect_tcp("127.0.0.1", port)).aclose()
                break
            except OSError:
                await anyio.sleep(0.1)
    for mode in ("auto", "legacy"):
        async with Client(serve_http, mode=mode) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            assert "text_stats" in names
            result = await client.call_tool("text_stats", {"text": "a b"})
            assert not result.is_error


def test_serve_refuses_a_non_loopback_host(workspace: Path) -> None:
    done = subprocess.run(
        [ALEPH, "serve", "--http", "--host", "0.0.0.0"], cwd=workspace, capture_output=True, text=True
    )
    assert 2 == done.returncode
    assert "loopback" in done.stderr


async def test_served_http_connections_send_small_writes_at_once() -> None:
    """Accepted connections carry TCP_NODELAY, so a response written in parts never waits on a delayed ACK."""
    from aleph._mcp.serve import bind_loopback

    listener = bind_loopback("127.0.0.1", 0)
    accepted = anyio.Event()
    flags: list[int] = []

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        flags.append(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        accepted.set()
        writer.close()

    server = await asyncio.start_server(on_connect, sock=listener)
    async with server:
        stream = await anyio.connect_tcp("127.0.0.1", listener.getsockname()[1])
        with anyio.fail_after(10):
            await accepted.wait()
        await stream.aclose()
    assert flags == [1]
