"""A small forward proxy on loopback that enforces the origin policy on every connection.

Playwright's ``route`` handler sees each request the page makes, but not the hops of a redirect
chain: Chromium follows those internally. Every browser context therefore sends its traffic
through this proxy (loopback included, ``<-loopback>``), which sees each hop as a new request,
resolves the host itself, checks the policy on the resolved addresses, and connects to the address
it checked — so a DNS answer cannot change between the check and the connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections import deque
from urllib.parse import urlsplit

from aleph_browser._policy import OriginPolicy

__all__ = ["BLOCK_HEADER", "PolicyProxy"]

BLOCK_HEADER = "X-Aleph-Browser-Policy"
"""Header on the proxy's refusal responses, so a tool can tell a policy block from a site's own 403."""

_HEAD_LIMIT = 64 * 1024
_CONNECT_TIMEOUT = 15.0
_HOP_HEADERS = (b"proxy-connection", b"connection", b"keep-alive", b"proxy-authorization")


def _html_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


class PolicyProxy:
    """One proxy per browser context; ``refusals`` keeps the most recent (url, reason) pairs."""

    def __init__(self, policy: OriginPolicy) -> None:
        self.policy = policy
        self.refusals: deque[tuple[str, str]] = deque(maxlen=100)
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    @property
    def url(self) -> str:
        """The proxy's address for Playwright's ``proxy={"server": ...}``."""
        assert self._server is not None, "start() the proxy first"
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    async def start(self) -> None:
        """Listen on a random loopback port."""
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0, limit=_HEAD_LIMIT)

    async def close(self) -> None:
        """Stop listening and drop every open tunnel."""
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            writer.close()
        self._writers.clear()
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)
            self._server = None

    def reason_for(self, url: str) -> str | None:
        """Why the proxy refused ``url`` (an http URL, or any URL of a refused https origin), if it did."""
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme in ("https", "wss") else 80)
        tunnel = f"https://{parts.hostname}:{port}" if parts.hostname else None
        for refused, reason in reversed(self.refusals):
            if refused == url or refused == tunnel:
                return reason
        return None

    async def _check(self, schemes: tuple[str, ...], host: str, port: int, url: str) -> tuple[str | None, str | None]:
        """(reason, address): a refusal, or the checked address to connect to."""
        reason = self.policy.check_origin(schemes, host, port)
        if reason is not None:
            return reason, None
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as exc:
            return f"cannot resolve {host}: {exc}", None
        addresses = tuple(dict.fromkeys(str(info[4][0]) for info in infos))
        if not addresses:
            return f"cannot resolve {host}", None
        reason = self.policy.check_origin(schemes, host, port, addresses)
        return reason, None if reason else addresses[0]

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            await self._serve(reader, writer)
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError, TimeoutError):
            pass
        finally:
            self._writers.discard(writer)
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 60)
        request_line, _, rest = head.partition(b"\r\n")
        method, target, version = request_line.decode("latin-1").split(" ", 2)
        if method == "CONNECT":
            host, _, port_text = target.rpartition(":")
            host, port = host.strip("[]").lower(), int(port_text)
            url = f"https://{target}"
            # A tunnel may carry https or (for a ws:// upgrade on a non-default port) plain traffic.
            schemes: tuple[str, ...] = ("https", "wss") if port == 443 else ("https", "wss", "http", "ws")
        else:
            parts = urlsplit(target)
            if parts.scheme != "http" or not parts.hostname:
                await self._reply(writer, 400, "the proxy only forwards absolute http:// URLs and CONNECT", target)
                return
            host, port, url = parts.hostname.lower(), parts.port or 80, target
            schemes = ("http", "ws")
        reason, address = await self._check(schemes, host, port, url)
        if reason is not None or address is None:
            self.refusals.append((url, reason or "refused"))
            await self._reply(writer, 403, f"blocked by the browser origin policy: {reason}", url)
            return
        try:
            up_reader, up_writer = await asyncio.wait_for(asyncio.open_connection(address, port), _CONNECT_TIMEOUT)
        except (OSError, TimeoutError) as exc:
            await self._reply(writer, 502, f"cannot connect to {host}:{port}: {exc}", url, policy=False)
            return
        self._writers.add(up_writer)
        try:
            if method == "CONNECT":
                writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                await writer.drain()
            else:
                path = parts.path or "/"
                if parts.query:
                    path += "?" + parts.query
                headers = [
                    line
                    for line in rest.split(b"\r\n")
                    if line and line.split(b":", 1)[0].strip().lower() not in _HOP_HEADERS
                ]
                # One request per upstream connection keeps the proxy stateless: no response framing to parse.
                up_writer.write(
                    f"{method} {path} {version}\r\n".encode("latin-1")
                    + b"".join(h + b"\r\n" for h in headers)
                    + b"Connection: close\r\n\r\n"
                )
                await up_writer.drain()
            # When either direction ends (the upstream closed after its response, or the client left),
            # the exchange is over.
            pipes = [asyncio.ensure_future(_pipe(reader, up_writer)), asyncio.ensure_future(_pipe(up_reader, writer))]
            _, pending = await asyncio.wait(pipes, return_when=asyncio.FIRST_COMPLETED)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        finally:
            self._writers.discard(up_writer)
            up_writer.close()

    @staticmethod
    async def _reply(writer: asyncio.StreamWriter, status: int, message: str, url: str, *, policy: bool = True) -> None:
        phrase = {400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway"}[status]
        body = (
            f"<!doctype html><title>{phrase}</title><h1>{phrase}</h1><p>{_html_escape(message)}</p>"
            f"<p>URL: {_html_escape(url[:500])}</p>"
        ).encode()
        extra = f"{BLOCK_HEADER}: blocked\r\n" if policy and status == 403 else ""
        writer.write(
            f"HTTP/1.1 {status} {phrase}\r\nContent-Type: text/html; charset=utf-8\r\n{extra}"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
            + body
        )
        with contextlib.suppress(OSError):
            await writer.drain()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (OSError, asyncio.IncompleteReadError):
        pass
