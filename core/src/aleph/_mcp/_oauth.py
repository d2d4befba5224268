"""``mcp_login``: OAuth 2.1 + PKCE for remote MCP servers through the SDK's ``OAuthClientProvider``.

The tool returns ``{authorization_url, instructions}`` at once; a background task waits up to five
minutes for the browser to hit a loopback redirect, exchanges the code (the SDK does discovery,
dynamic client registration and PKCE), stores tokens 0600 under ``<data_dir>/mcp/tokens/`` and
reconnects the server. Every endpoint a server names is validated (https, or http on loopback only;
the issuer's origin must match the metadata it served), and nothing a server supplies is ever handed
to a shell or a browser launcher: the user opens the URL.
"""

from __future__ import annotations

import ipaddress
import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

import anyio

from aleph._atomic import write_atomic
from aleph._errors import ExecutionFailed

if TYPE_CHECKING:
    from aleph._mcp._roles import ConnectionRegistry

__all__ = ["CALLBACK_WINDOW_S", "FileTokenStorage", "check_endpoint", "oauth_provider", "start_login"]

log = logging.getLogger("aleph.mcp")

CALLBACK_WINDOW_S = 300.0
"""How long the loopback redirect waits for the browser (reference: 5 minutes)."""


def is_loopback_host(host: str) -> bool:
    """Whether ``host`` names the loopback interface (``localhost``, 127.0.0.0/8, ``::1``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_endpoint(url: str, what: str) -> str:
    """``url`` if it is https, or http on a loopback host; else a ValueError naming ``what``."""
    if not isinstance(url, str) or len(url) > 4096 or any(ord(c) < 0x21 for c in url):
        raise ValueError(f"{what}: not a usable URL")
    parts = urlsplit(url)
    if parts.scheme == "https" and parts.hostname:
        return url
    if parts.scheme == "http" and parts.hostname and is_loopback_host(parts.hostname):
        return url
    raise ValueError(f"{what} {url!r} must use https (plain http is allowed only on loopback)")


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()


class FileTokenStorage:
    """The SDK's ``TokenStorage`` over one JSON file per server, written atomically with mode 0600."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def _write(self, data: dict[str, Any]) -> None:
        write_atomic(self.path, json.dumps(data))

    async def get_tokens(self) -> Any:
        """Stored tokens, if any."""
        from mcp.shared.auth import OAuthToken

        raw = self._read().get("tokens")
        return OAuthToken.model_validate(raw) if raw else None

    async def set_tokens(self, tokens: Any) -> None:
        """Store tokens."""
        data = self._read()
        data["tokens"] = tokens.model_dump(mode="json", exclude_none=True)
        self._write(data)

    async def get_client_info(self) -> Any:
        """Stored dynamic-registration client info, if any."""
        from mcp.shared.auth import OAuthClientInformationFull

        raw = self._read().get("client")
        return OAuthClientInformationFull.model_validate(raw) if raw else None

    async def set_client_info(self, client_info: Any) -> None:
        """Store client info."""
        data = self._read()
        data["client"] = client_info.model_dump(mode="json", exclude_none=True)
        self._write(data)


def _token_path(manager: ConnectionRegistry, server_id: str) -> Path:
    return manager.data_dir / "mcp" / "tokens" / f"{server_id}.json"


def _validate_metadata(provider: Any, server_url: str) -> None:
    meta = provider.context.oauth_metadata
    if meta is None:
        return
    issuer = str(meta.issuer)
    check_endpoint(issuer, "OAuth issuer")
    check_endpoint(str(meta.authorization_endpoint), "OAuth authorization endpoint")
    check_endpoint(str(meta.token_endpoint), "OAuth token endpoint")
    if meta.registration_endpoint is not None:
        check_endpoint(str(meta.registration_endpoint), "OAuth registration endpoint")
    auth_server = getattr(provider.context, "auth_server_url", None)
    if auth_server and _origin(str(auth_server)) != _origin(issuer):
        raise ValueError(f"OAuth issuer {issuer!r} does not match the authorization server {auth_server!r}")


def oauth_provider(
    manager: ConnectionRegistry,
    server_id: str,
    url: str,
    *,
    redirect_uri: str | None = None,
    scope: str | None = None,
    redirect_handler: Any = None,
    callback_handler: Any = None,
) -> Any:
    """An ``OAuthClientProvider`` for ``server_id`` with file storage (reuses stored tokens)."""
    from mcp.client.auth import OAuthClientProvider
    from mcp.shared.auth import OAuthClientMetadata

    metadata = OAuthClientMetadata(
        client_name="Aleph",
        redirect_uris=[redirect_uri or "http://127.0.0.1/callback"],  # type: ignore[list-item]
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="none",
        scope=scope,
    )
    return OAuthClientProvider(
        url,
        metadata,
        FileTokenStorage(_token_path(manager, server_id)),
        redirect_handler=redirect_handler,
        callback_handler=callback_handler,
    )


def has_tokens(manager: ConnectionRegistry, server_id: str) -> bool:
    """Whether a login stored tokens for ``server_id``."""
    return _token_path(manager, server_id).is_file()


async def _serve_callback(listener: Any, got: dict[str, str], done: anyio.Event) -> None:
    """Accept loopback requests until one carries ``code`` (the browser's redirect)."""

    async def handle(stream: Any) -> None:
        async with stream:
            with anyio.move_on_after(10):
                data = b""
                while b"\r\n" not in data and len(data) < 8192:
                    chunk = await stream.receive(4096)
                    if not chunk:
                        break
                    data += chunk
                line = data.split(b"\r\n", 1)[0].decode("latin-1")
                parts = line.split(" ")
                query = parse_qs(urlsplit(parts[1]).query) if len(parts) >= 2 else {}
                if "code" in query or "error" in query:
                    for key in ("code", "state", "iss", "error"):
                        if key in query:
                            got[key] = query[key][0]
                    body = b"Aleph: login received. You can close this window."
                    done.set()
                else:
                    body = b"Aleph: waiting for the OAuth redirect."
                await stream.send(
                    b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\nContent-Length: "
                    + str(len(body)).encode()
                    + b"\r\n\r\n"
                    + body
                )

    async with anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, handle)
        await done.wait()
        tg.cancel_scope.cancel()


_WELL_KNOWN = ("oauth-protected-resource", "oauth-authorization-server", "openid-configuration")


async def oauth_absent(url: str, headers: dict[str, str], timeout: float) -> str | None:
    """Why the MCP server at ``url`` has no OAuth, or None when it asks for it (or may).

    Discovery first, so a login against a server without OAuth fails at once: the server asks for
    credentials with 401 (RFC 9728), or publishes protected-resource or authorization-server metadata.
    """
    import httpx2

    origin = _origin(url)
    path = urlsplit(url).path.rstrip("/")
    probe_headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    try:
        async with httpx2.AsyncClient(headers=headers, timeout=timeout, follow_redirects=False) as http:
            probe = await http.post(url, json={"jsonrpc": "2.0", "id": 0, "method": "ping"}, headers=probe_headers)
            if probe.status_code == 401 or "www-authenticate" in probe.headers:
                return None
            for name in _WELL_KNOWN:
                for suffix in (path, "") if path and name == "oauth-protected-resource" else ("",):
                    found = await http.get(f"{origin}/.well-known/{name}{suffix}")
                    if found.status_code == 200 and "json" in found.headers.get("content-type", ""):
                        return None
    except httpx2.HTTPError as exc:
        return f"it could not be reached to look for OAuth ({type(exc).__name__}: {str(exc)[:200]})"
    return (
        f"it answered without asking for credentials (HTTP {probe.status_code}) and publishes no OAuth "
        "metadata (.well-known/oauth-protected-resource or oauth-authorization-server)"
    )


async def start_login(manager: ConnectionRegistry, server_id: str, scope: str | None) -> dict[str, Any]:
    """Begin the OAuth flow for ``server_id`` and return ``{authorization_url, instructions}``."""
    tool = "mcp_login"
    conn = manager.server(server_id)
    if conn is None:
        raise ExecutionFailed(tool, f"MCP server not found: {server_id}")
    if conn.transport == "stdio":
        raise ExecutionFailed(
            tool, f"MCP server {server_id!r} uses stdio transport; OAuth applies only to remote (http/sse) servers"
        )
    url = conn.config.url
    if not url:
        raise ExecutionFailed(tool, f"MCP server {server_id!r} has no URL configured")
    try:
        check_endpoint(url, f"MCP server {server_id!r} URL")
    except ValueError as exc:
        raise ExecutionFailed(tool, str(exc)) from None

    if server_id in manager.logins:
        raise ExecutionFailed(tool, f"a login for MCP server {server_id!r} is already waiting for the browser")
    absent = await oauth_absent(url, dict(conn.config.headers), min(conn.config.timeout_seconds, 15.0))
    if absent is not None:
        raise ExecutionFailed(
            tool, f"MCP server {server_id!r} does not use OAuth, so there is nothing to log in to: {absent}"
        )

    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared.auth import AuthorizationCodeResult

    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    redirect_uri = f"http://127.0.0.1:{port}/callback"
    url_ready = anyio.Event()
    holder: dict[str, Any] = {}
    got: dict[str, str] = {}
    got_code = anyio.Event()

    async def redirect_handler(authorization_url: str) -> None:
        try:
            _validate_metadata(provider, url)
            check_endpoint(authorization_url, "authorization URL")
        except ValueError as exc:
            holder["error"] = str(exc)
            url_ready.set()
            raise
        holder["url"] = authorization_url
        url_ready.set()

    async def callback_handler() -> AuthorizationCodeResult:
        with anyio.fail_after(CALLBACK_WINDOW_S):
            await got_code.wait()
        if "error" in got:
            raise ValueError(f"the authorization server refused: {got['error'][:200]}")
        return AuthorizationCodeResult(code=got["code"], state=got.get("state"), iss=got.get("iss"))

    provider = oauth_provider(
        manager,
        server_id,
        url,
        redirect_uri=redirect_uri,
        scope=scope,
        redirect_handler=redirect_handler,
        callback_handler=callback_handler,
    )

    async def flow() -> None:
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(_serve_callback, listener, got, got_code)
                try:
                    with anyio.fail_after(CALLBACK_WINDOW_S + 60):
                        async with (
                            httpx2.AsyncClient(auth=provider, headers=dict(conn.config.headers)) as http,
                            Client(streamable_http_client(url, http_client=http)),
                        ):
                            pass
                    log.info("MCP server %r: OAuth login complete", server_id)
                    # A restart attempt may already have picked up the stored tokens and connected.
                    if not conn.connected:
                        conn.auth = provider
                        manager.reconnect(conn)
                except Exception as exc:
                    holder.setdefault("error", f"login failed: {type(exc).__name__}: {str(exc)[:300]}")
                    log.warning("MCP server %r: OAuth login failed: %s", server_id, holder["error"])
                finally:
                    url_ready.set()
                    got_code.set()
                    tg.cancel_scope.cancel()
        finally:
            await listener.aclose()
            manager.logins.discard(server_id)

    manager.logins.add(server_id)
    manager.spawn(flow)
    with anyio.move_on_after(60):
        await url_ready.wait()
    if "url" not in holder:
        raise ExecutionFailed(tool, holder.get("error", "the authorization server did not answer within 60s"))
    return {
        "authorization_url": holder["url"],
        "instructions": (
            f"Open the authorization URL in a browser and approve access for MCP server {server_id!r}. "
            f"The login completes within {int(CALLBACK_WINDOW_S // 60)} minutes on {redirect_uri}; "
            "the server then reconnects on its own."
        ),
    }
