"""``mcp_login`` against an HTTP server that has no OAuth fails at once with a reason, not after a long wait."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
import uvicorn
from mcp.server import MCPServer

from aleph import ExecutionFailed, UnscopedToolService
from aleph._config import McpServerConfig

from .conftest import MakeManager, free_port, wait_until
from .test_oauth_flow import protected_server

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

__all__ = ["protected_server"]


@pytest.fixture
def plain_server() -> Iterator[str]:
    port = free_port()
    srv = MCPServer("plain")

    @srv.tool()
    def hello() -> str:
        """Say hello."""
        return "hello"

    server = uvicorn.Server(uvicorn.Config(srv.streamable_http_app(), host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.should_exit = True
        thread.join(timeout=15)


async def test_login_to_a_server_without_oauth_says_there_is_none(
    protected_server: str, plain_server: str, make_manager: MakeManager
) -> None:
    manager = await make_manager(
        {
            "prot": McpServerConfig(url=protected_server, timeout_seconds=10),
            "plain": McpServerConfig(url=plain_server, timeout_seconds=10),
        }
    )
    registry = manager.registry
    await wait_until(registry, lambda: "mcp_login" in registry and "plain__hello" in registry)
    with pytest.raises(ExecutionFailed) as refused:
        await UnscopedToolService(registry).execute("mcp_login", {"server": "plain"})
    message = str(refused.value)
    # Before, the login waited 60 s for an authorization URL that never came ("did not answer within 60s").
    assert "does not use OAuth" in message, message
    assert "plain" in message
