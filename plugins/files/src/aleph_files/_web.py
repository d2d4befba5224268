"""``web_fetch``: HTTP(S) GET with an SSRF guard, size and time bounds, HTML turned into markdown.

The guard runs on the *resolved* address: the host name is resolved once, every address is
checked, and the connection goes to that exact IP (the ``Host`` header and TLS SNI carry the
name, so certificates are still verified against it). A DNS answer that changes between the
check and the connect (rebinding) therefore cannot redirect the request. Redirects are followed
by hand, and each hop is resolved and checked again.
"""

from __future__ import annotations

import re
import socket
import time
from typing import Any

import anyio
import httpx
from pydantic import Field, model_validator

from aleph import (
    AlephTool,
    ExecutionFailed,
    PermissionDenied,
    ToolArgs,
    ToolFacts,
    ToolTimeout,
    TransportError,
    current_call,
    is_public_address,
    parse_address,
)
from aleph_files._config import FilesConfig

__all__ = ["WebFetchTool", "html_to_markdown"]

_TEXTUAL = ("text/", "application/json", "application/xml", "application/xhtml", "application/javascript")


def html_to_markdown(html: str) -> tuple[str | None, str]:
    """Readable markdown from an HTML page (scripts, styles and frames dropped) and its title."""
    from bs4 import BeautifulSoup
    from markdownify import markdownify

    soup = BeautifulSoup(html, "html.parser")
    title = soup.title.get_text(strip=True) if soup.title else None
    for tag in soup(["script", "style", "noscript", "iframe", "svg", "template", "head"]):
        tag.decompose()
    text = markdownify(str(soup), heading_style="ATX", strip=["img"])
    text = re.sub(r"[ \t]+\n", "\n", text)
    return title or None, re.sub(r"\n{3,}", "\n\n", text).strip()


_HEADER_NAME = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]{1,128}")
_RESERVED_HEADERS = frozenset(("host", "content-length", "transfer-encoding", "connection", "upgrade"))


class Header(ToolArgs):
    name: str = Field(max_length=128)
    """The header's name, e.g. ``Authorization`` (not Host, Content-Length, Transfer-Encoding, Connection, Upgrade)."""
    value: str = Field(max_length=8192)
    """Its value (no line breaks)."""

    @model_validator(mode="after")
    def _check(self) -> Header:
        if not _HEADER_NAME.fullmatch(self.name) or self.name.lower() in _RESERVED_HEADERS:
            raise ValueError(f"header {self.name!r}: not a header this tool may set")
        if any(c in self.value for c in "\r\n\x00"):
            raise ValueError(f"header {self.name!r}: the value holds a line break")
        return self


class WebFetchArgs(ToolArgs):
    url: str = Field(max_length=8192)
    """The http:// or https:// URL to fetch."""
    raw: bool = False
    """Return the body as received instead of converting HTML to markdown."""
    headers: list[Header] = Field(default_factory=list, max_length=32)
    """Extra request headers (e.g. ``Authorization``), sent to this URL only: a redirect is followed without them.
    A value may be a vault handle such as ``{{vault:github_token}}`` (see docs/admin.md)."""


class WebFetchTool(AlephTool[WebFetchArgs]):
    NAME = "web_fetch"
    DESCRIPTION = (
        "Fetch a web page or text document by URL (http/https) and return it as readable markdown text. "
        "Private, loopback and link-local addresses are refused; bodies are capped (default 5 MB) and the "
        "result says when it was truncated."
    )
    Args = WebFetchArgs
    FACTS = ToolFacts(
        untrusted_output="web page",
        idempotent=True,
        concurrent_safe=True,
        max_duration_ms=30_000,
        tags=("network", "read"),
    )

    def __init__(self, config: FilesConfig) -> None:
        self.config = config

    async def call(self, args: WebFetchArgs) -> dict[str, Any]:
        start = time.monotonic()
        try:
            with anyio.fail_after(self.config.web_timeout_seconds):
                return await self._fetch(args)
        except TimeoutError:
            raise ToolTimeout(self.NAME, int((time.monotonic() - start) * 1000)) from None

    async def _pin(self, url: httpx.URL) -> str:
        """Resolve ``url``'s host once, check every address, and return the one to connect to."""
        if url.scheme not in ("http", "https"):
            raise PermissionDenied(self.NAME, f"only http and https URLs are fetched, not {url.scheme!r}")
        if url.userinfo:
            raise PermissionDenied(self.NAME, "URLs with embedded credentials are refused")
        host = url.host.lower()
        if not host:
            raise ExecutionFailed(self.NAME, f"URL {url} has no host")
        port = url.port or (443 if url.scheme == "https" else 80)
        try:
            infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise TransportError(self.NAME, f"cannot resolve {host!r}: {exc}") from None
        addresses = [a for info in infos if (a := parse_address(str(info[4][0]))) is not None]
        if not addresses:
            raise TransportError(self.NAME, f"{host!r} resolved to no address")
        trusted = self.config.allow_private_networks or host in self.config.allowed_hosts
        if not trusted:
            for addr in addresses:
                if not is_public_address(addr):
                    raise PermissionDenied(
                        self.NAME,
                        f"{host} resolves to {addr}, a private, loopback, link-local or reserved address; "
                        "set [files] allowed_hosts or allow_private_networks to reach internal hosts",
                    )
        return str(addresses[0])

    async def _fetch(self, args: WebFetchArgs) -> dict[str, Any]:
        try:
            url = httpx.URL(args.url)
        except (httpx.InvalidURL, ValueError) as exc:
            raise ExecutionFailed(self.NAME, f"url: not a valid URL: {exc}") from None
        cap = self.config.web_max_bytes
        redirects: list[str] = []
        async with httpx.AsyncClient(
            trust_env=False, follow_redirects=False, timeout=self.config.web_timeout_seconds
        ) as client:
            while True:
                ip = await self._pin(url)
                host_header = url.netloc.decode("ascii").rsplit("@", 1)[-1]
                pinned = url.copy_with(host=ip)
                extensions = {"sni_hostname": url.host} if url.scheme == "https" else {}
                headers = {"User-Agent": self.config.user_agent, "Accept": "*/*"}
                if not redirects:  # the caller's headers (credentials, often) go to the URL it named only
                    headers.update((h.name, h.value) for h in args.headers)
                headers["Host"] = host_header
                try:
                    async with client.stream("GET", pinned, headers=headers, extensions=extensions) as resp:
                        if resp.is_redirect and "location" in resp.headers:
                            if len(redirects) >= self.config.web_max_redirects:
                                raise ExecutionFailed(self.NAME, f"more than {self.config.web_max_redirects} redirects")
                            url = url.join(resp.headers["location"])
                            redirects.append(str(url))
                            call = current_call()
                            if call is not None:  # every hop meets the rules the first URL met
                                hop = {**args.model_dump(mode="json"), "url": str(url), "headers": []}
                                await call.authorize(self.NAME, hop)
                            continue
                        body, truncated = await _read_capped(resp, cap)
                        return self._result(args, url, resp, body, truncated, redirects)
                except httpx.HTTPError as exc:
                    raise TransportError(self.NAME, f"fetching {url} failed: {exc}") from None

    def _result(
        self,
        args: WebFetchArgs,
        url: httpx.URL,
        resp: httpx.Response,
        body: bytes,
        truncated: bool,
        redirects: list[str],
    ) -> dict[str, Any]:
        ctype = resp.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if ctype and not ctype.startswith(_TEXTUAL) and not ctype.endswith(("+json", "+xml")):
            raise ExecutionFailed(self.NAME, f"{url} is {ctype}, not text; web_fetch returns readable text only")
        text = body.decode(resp.charset_encoding or "utf-8", errors="replace")
        title = None
        if not args.raw and ctype in ("text/html", "application/xhtml+xml", ""):
            title, text = html_to_markdown(text)
        out: dict[str, Any] = {
            "url": args.url,
            "final_url": str(url),
            "status": resp.status_code,
            "content_type": ctype or None,
            "title": title,
            "content": text,
            "bytes": len(body),
            "truncated": truncated,
        }
        if redirects:
            out["redirects"] = redirects
        if truncated:
            out["content"] += f"\n\n[... truncated at {self.config.web_max_bytes} bytes ...]"
        return out


async def _read_capped(resp: httpx.Response, cap: int) -> tuple[bytes, bool]:
    chunks, size = [], 0
    async for chunk in resp.aiter_bytes():
        if size + len(chunk) > cap:
            chunks.append(chunk[: cap - size])
            return b"".join(chunks), True
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks), False
