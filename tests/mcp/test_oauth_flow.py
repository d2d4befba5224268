"""``mcp_login`` end to end against a real local OAuth 2.1 authorization server + protected MCP server.

The fixture is the MCP SDK's own auth stack (``MCPServer(auth=..., auth_server_provider=...)``) served by
uvicorn on loopback, with an in-memory provider that approves every authorization request at once (the
"user" clicking approve). The test plays the browser: it opens the URL ``mcp_login`` returned and follows
the redirect to Aleph's loopback callback.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
import uvicorn
from mcp.server import MCPServer
from mcp.server.auth.provider import AccessToken, AuthorizationCode, AuthorizationParams, RefreshToken
from mcp.server.auth.provider import construct_redirect_uri as redirect_to
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from aleph import UnscopedToolService
from aleph._config import McpServerConfig

from .conftest import MakeManager, free_port, wait_until

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


class ApproveEverything:
    """An in-memory authorization server provider that approves every request immediately."""

    def __init__(self) -> None:
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.tokens: dict[str, AccessToken] = {}

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        assert client_info.client_id is not None
        self.clients[client_info.client_id] = client_info

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        code = secrets.token_urlsafe(16)
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=params.scopes or [],
            expires_at=time.time() + 300,
            client_id=client.client_id or "",
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
        )
        return redirect_to(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(self, client: Any, authorization_code: str) -> AuthorizationCode | None:
        return self.codes.get(authorization_code)

    async def exchange_authorization_code(self, client: Any, authorization_code: AuthorizationCode) -> OAuthToken:
        del self.codes[authorization_code.code]
        token = secrets.token_urlsafe(16)
        self.tokens[token] = AccessToken(
            token=token, client_id=authorization_code.client_id, scopes=authorization_code.scopes
        )
        return OAuthToken(access_token=token, token_type="Bearer", expires_in=3600)

    async def load_refresh_token(self, client: Any, refresh_token: str) -> RefreshToken | None:
        return None

    async def exchange_refresh_token(self, client: Any, refresh_token: Any, scopes: list[str]) -> OAuthToken:
        raise NotImplementedError

    async def load_access_token(self, token: str) -> AccessToken | None:
        return self.tokens.get(token)

    async def revoke_token(self, token: Any) -> None:
        self.tokens.pop(getattr(token, "token", ""), None)


@pytest.fixture
def protected_server() -> Iterator[str]:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    srv = MCPServer(
        "protected",
        auth=AuthSettings(
            issuer_url=base,
            resource_server_url=f"{base}/mcp",
            client_registration_options=ClientRegistrationOptions(enabled=True),
            validate_token_resource=False,
        ),
        auth_server_provider=ApproveEverything(),
    )

    @srv.tool()
    def secret_data() -> str:
        """Only for logged-in clients."""
        return "the secret"

    # Its own thread and event loop: the server outlives any one task of the test.
    server = uvicorn.Server(uvicorn.Config(srv.streamable_http_app(), host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        yield f"{base}/mcp"
    finally:
        server.should_exit = True
        thread.join(timeout=15)


async def test_login_completes_stores_tokens_and_reconnects(
    protected_server: str, make_manager: MakeManager, tmp_path: Path
) -> None:
    # protected_server is set up first so it is torn down last, after the manager closed its session.
    manager = await make_manager({"prot": McpServerConfig(url=protected_server, timeout_seconds=10)})
    registry = manager.registry
    await wait_until(registry, lambda: "mcp_login" in registry)  # offered because the server wants OAuth
    status = manager.servers()[0]
    assert status.state in ("restarting", "dead"), status
    assert "mcp_login" in (status.reason or "")
    assert "prot__secret_data" not in registry

    started = await UnscopedToolService(registry).execute("mcp_login", {"server": "prot"})
    url = started.value["authorization_url"]
    assert url.startswith(protected_server.removesuffix("/mcp"))
    assert "code_challenge=" in url and "code_challenge_method=S256" in url

    # Play the browser: the authorization server redirects to Aleph's loopback callback.
    async with httpx2.AsyncClient(follow_redirects=False) as browser:
        approve = await browser.get(url)
        assert approve.status_code in (302, 303, 307)
        callback = approve.headers["location"]
        assert callback.startswith("http://127.0.0.1:")
        landed = await browser.get(callback)
        assert "login received" in landed.text

    await wait_until(registry, lambda: "prot__secret_data" in registry)
    assert "connected" == manager.servers()[0].state, manager.servers()[0]
    assert "the secret" == (await UnscopedToolService(registry).execute("prot__secret_data", {})).text
    token_file = tmp_path / "data" / "mcp" / "tokens" / "prot.json"
    assert 0o600 == token_file.stat().st_mode & 0o777
