"""web_fetch against pages served on loopback, and the SSRF guard's default refusals."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest

import aleph
from aleph import is_public_address

from .conftest import make_runtime
from .servers import serve

PAGE = b"""<html><head><title>Demo page</title><style>body{}</style><script>alert(1)</script></head>
<body><h1>Hello</h1><p>Some <b>bold</b> text and a <a href="/next">link</a>.</p></body></html>"""


def routes(base_holder: list[str]) -> dict:
    return {
        "/page": lambda h: (200, {"Content-Type": "text/html; charset=utf-8"}, PAGE),
        "/big": lambda h: (200, {"Content-Type": "text/plain"}, b"z" * 200_000),
        "/hop": lambda h: (302, {"Location": "/page"}, b""),
        "/to-private": lambda h: (302, {"Location": f"http://localhost:{base_holder[0].rsplit(':', 1)[1]}/page"}, b""),
        "/to-metadata": lambda h: (302, {"Location": "http://169.254.169.254/latest/meta-data/"}, b""),
        "/image": lambda h: (200, {"Content-Type": "image/png"}, b"\x89PNG...."),
    }


async def fetch(workspace: Path, toml: str, url: str) -> aleph.ToolResult:
    async with make_runtime(workspace, toml) as rt:
        return await aleph.UnscopedToolService(rt.registry).call("web_fetch", {"url": url})


@pytest.mark.anyio
async def test_allowed_loopback_page_becomes_markdown(workspace: Path) -> None:
    holder: list[str] = []
    with serve(routes(holder)) as base:
        holder.append(base)
        result = await fetch(workspace, '[files]\nallowed_hosts = ["127.0.0.1"]\n', f"{base}/hop")
    assert result.success, result.error
    import json

    out = json.loads(result.output or "")
    assert "Demo page" == out["title"]
    assert "# Hello" in out["content"] and "**bold**" in out["content"] and "[link](/next)" in out["content"]
    assert "alert" not in out["content"] and "body{}" not in out["content"]
    assert [f"{base}/page"] == out["redirects"] and 200 == out["status"]


@pytest.mark.anyio
async def test_body_is_capped_at_the_configured_size(workspace: Path) -> None:
    import json

    with serve(routes([])) as base:
        result = await fetch(workspace, "[files]\nallow_private_networks = true\nweb_max_bytes = 4096\n", f"{base}/big")
    out = json.loads(result.output or "")
    assert (True, 4096) == (out["truncated"], out["bytes"])
    assert out["content"].endswith("[... truncated at 4096 bytes ...]")


@pytest.mark.anyio
@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/",
        "http://10.1.2.3/",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::1]/",
        "http://2130706433/",  # decimal spelling of 127.0.0.1
        "http://0x7f.1/",  # hex/short spelling of 127.0.0.1
        "http://[::ffff:127.0.0.1]/",  # IPv4-mapped IPv6
        "http://[::ffff:a9fe:a9fe]/",  # IPv4-mapped 169.254.169.254
        "http://localhost/",
        "http://224.0.0.1/",
    ],
)
async def test_default_guard_refuses_non_public_addresses(workspace: Path, url: str) -> None:
    result = await fetch(workspace, "", url)
    assert not result.success
    assert "permission_denied" == result.error_kind, result.error


@pytest.mark.anyio
async def test_redirect_from_an_allowed_host_to_a_private_one_is_refused(workspace: Path) -> None:
    holder: list[str] = []
    with serve(routes(holder)) as base:
        holder.append(base)
        toml = '[files]\nallowed_hosts = ["127.0.0.1"]\n'
        to_localhost = await fetch(workspace, toml, f"{base}/to-private")
        to_metadata = await fetch(workspace, toml, f"{base}/to-metadata")
    assert ("permission_denied", "permission_denied") == (to_localhost.error_kind, to_metadata.error_kind)
    assert "localhost resolves to 127.0.0.1" in (to_localhost.error or "")
    assert "169.254.169.254" in (to_metadata.error or "")


@pytest.mark.anyio
async def test_non_http_schemes_and_binary_bodies_are_refused(workspace: Path) -> None:
    assert "permission_denied" == (await fetch(workspace, "", "file:///etc/passwd")).error_kind
    with serve(routes([])) as base:
        result = await fetch(workspace, "[files]\nallow_private_networks = true\n", f"{base}/image")
    assert not result.success and "image/png, not text" in (result.error or "")


def test_public_address_classification() -> None:
    public = ["93.184.216.34", "2606:4700::1111", "::ffff:93.184.216.34"]
    private = [
        "127.0.0.1",
        "10.0.0.1",
        "172.16.0.1",
        "192.168.1.1",
        "100.64.0.1",
        "169.254.169.254",
        "0.0.0.0",
        "239.1.1.1",
        "::1",
        "fe80::1",
        "fc00::1",
        "::ffff:10.0.0.1",
        "64:ff9b::7f00:1",
        "2002:7f00:1::",
    ]
    assert all(is_public_address(ipaddress.ip_address(a)) for a in public)
    assert not any(is_public_address(ipaddress.ip_address(a)) for a in private)
