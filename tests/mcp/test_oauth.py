"""``mcp_login``: what can run here without an authorization server — refusals and endpoint validation.

A full browser round trip (discovery, dynamic registration, PKCE, loopback redirect, token storage) needs an
OAuth authorization server; none is started in these tests, so that path is not covered here.
"""

from __future__ import annotations

import pytest
from mcp.server import MCPServer

from aleph import UnscopedToolService
from aleph._config import McpServerConfig
from aleph._mcp._oauth import FileTokenStorage, check_endpoint

from .conftest import MakeManager

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    "url",
    ["https://auth.example.com/authorize", "http://127.0.0.1:8080/cb", "http://localhost/x", "http://[::1]:9/x"],
)
def test_https_or_loopback_http_endpoints_are_accepted(url: str) -> None:
    assert url == check_endpoint(url, "endpoint")


@pytest.mark.parametrize(
    "url",
    [
        "http://auth.example.com/authorize",
        "http://10.0.0.1/token",
        "file:///etc/passwd",
        "javascript:alert(1)",
        "https://",
        "https://evil.example.com/\nX-Injected: 1",
        "https://example.com/ $(rm -rf ~)",
    ],
)
def test_other_endpoints_are_refused(url: str) -> None:
    with pytest.raises(ValueError):
        check_endpoint(url, "endpoint")


def tools_server() -> MCPServer:
    srv = MCPServer("s")

    @srv.tool()
    def hello() -> str:
        """Hello."""
        return "hi"

    return srv


async def test_login_is_not_offered_without_a_remote_server(make_manager: MakeManager) -> None:
    manager = await make_manager({"local": McpServerConfig(command="in-process")}, inprocess={"local": tools_server()})
    assert "mcp_login" not in manager.registry


async def test_login_refuses_unknown_and_stdio_servers(make_manager: MakeManager) -> None:
    # An unreachable remote server that answered 401 would offer mcp_login; here we call the tool directly.
    from aleph._mcp._captools import build_capability_tool

    manager = await make_manager({"local": McpServerConfig(command="in-process")}, inprocess={"local": tools_server()})
    manager.registry.register(build_capability_tool(manager, "mcp_login"))
    service = UnscopedToolService(manager.registry)
    unknown = await service.call("mcp_login", {"server": "nope"})
    assert "MCP server not found: nope" in (unknown.error or "")
    stdio = await service.call("mcp_login", {"server": "local"})
    assert "uses stdio transport; OAuth applies only to remote (http/sse) servers" in (stdio.error or "")


async def test_login_refuses_a_plain_http_remote_server(make_manager: MakeManager) -> None:
    from aleph._mcp._captools import build_capability_tool

    # Port 9 on a documentation address: never connects; the URL check refuses before any request.
    cfg = McpServerConfig(url="http://192.0.2.1:9/mcp", timeout_seconds=0.5)
    manager = await make_manager({"remote": cfg})
    manager.registry.register(build_capability_tool(manager, "mcp_login"))
    result = await UnscopedToolService(manager.registry).call("mcp_login", {"server": "remote"})
    assert "must use https" in (result.error or "")


async def test_tokens_are_stored_with_mode_0600(tmp_path: object) -> None:
    from pathlib import Path

    from mcp.shared.auth import OAuthToken

    path = Path(str(tmp_path)) / "tokens" / "srv.json"
    storage = FileTokenStorage(path)
    await storage.set_tokens(OAuthToken(access_token="secret-token", token_type="Bearer"))
    assert 0o600 == path.stat().st_mode & 0o777
    got = await storage.get_tokens()
    assert got is not None and "secret-token" == got.access_token
