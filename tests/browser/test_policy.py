"""The origin policy: patterns, redirects, subresources and private addresses, enforced on every request."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Any

import pytest
from aleph_browser import OriginPattern, OriginPolicy
from aleph_browser._proxy import PolicyProxy

import aleph

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    "pattern, url, matches",
    [
        ("https://example.com", "https://example.com/x", True),
        ("https://example.com", "http://example.com/x", False),
        ("https://example.com", "https://example.com:8443/", False),
        ("*.example.com", "https://a.b.example.com/", True),
        ("*.example.com", "http://example.com:8080/", True),
        ("*.example.com", "https://badexample.com/", False),
        ("http://127.0.0.1:*", "http://127.0.0.1:5000/", True),
        ("http://127.0.0.1:*", "http://127.0.0.2:5000/", False),
        ("[::1]", "http://[::1]:80/", True),
    ],
)
def test_origin_patterns(pattern: str, url: str, matches: bool) -> None:
    policy = OriginPolicy([pattern], block_private=False)
    assert (policy.check_url(url) is None) == matches


@pytest.mark.parametrize("bad", ["https://example.com/path", "ftp://example.com", "exa mple.com", "http://x:99999"])
def test_bad_patterns_are_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="bad origin pattern"):
        OriginPattern.parse(bad)


def test_bad_pattern_in_config_fails_at_load_naming_the_key(tmp_path: Path) -> None:
    import aleph_browser.plugin

    (tmp_path / "aleph.toml").write_text('[browser]\nallowed_origins = ["https://x.com/path"]\n')
    with pytest.raises(aleph.PluginError, match="allowed_origins"):
        aleph.load(
            tmp_path / "aleph.toml", workspace=tmp_path, plugins=[aleph_browser.plugin], entry_points=False, strict=True
        )


def test_unknown_browser_key_is_refused(tmp_path: Path) -> None:
    import aleph_browser.plugin

    (tmp_path / "aleph.toml").write_text("[browser]\nheadles = false\n")
    with pytest.raises(aleph.PluginError, match="headles"):
        aleph.load(
            tmp_path / "aleph.toml", workspace=tmp_path, plugins=[aleph_browser.plugin], entry_points=False, strict=True
        )


def test_blocked_beats_allowed_and_refusals_name_the_rule() -> None:
    policy = OriginPolicy(["*.example.com"], ["https://evil.example.com"])
    assert policy.check_url("https://evil.example.com/") == (
        "https://evil.example.com:443 matches [browser] blocked_origins pattern 'https://evil.example.com'"
    )
    assert "is not in [browser] allowed_origins ('*.example.com')" in (policy.check_url("https://other.org/") or "")
    assert policy.check_url("https://www.example.com/") is None


@pytest.mark.parametrize(
    "url, kind",
    [
        ("http://127.0.0.1:8080/", "loopback"),
        ("http://localhost/", "loopback"),
        ("http://10.1.2.3/", "private"),
        ("http://169.254.169.254/latest/meta-data", "cloud metadata"),
        ("http://[::1]/", "loopback"),
        ("http://[::ffff:192.168.0.1]/", "private"),
        ("http://0.0.0.0/", "unspecified"),
    ],
)
def test_private_addresses_are_blocked_by_default(url: str, kind: str) -> None:
    reason = OriginPolicy().check_url(url)
    assert reason is not None and f"is a {kind} address" in reason
    assert "block_private_addresses is on" in reason


def test_an_allowed_origin_lifts_the_private_block_and_other_schemes_are_refused() -> None:
    policy = OriginPolicy(["http://127.0.0.1:*"])
    assert policy.check_url("http://127.0.0.1:9/") is None
    assert "scheme 'file'" in (policy.check_url("file:///etc/passwd") or "")
    assert policy.check_url("data:text/html,hi") is None
    assert policy.check_url("about:blank") is None


async def test_proxy_resolves_names_and_refuses_private_answers() -> None:
    name = socket.gethostname()
    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(name, 80, type=socket.SOCK_STREAM)}
    except OSError:
        pytest.skip(f"this machine's host name {name!r} does not resolve")
    proxy = PolicyProxy(OriginPolicy())
    await proxy.start()
    try:
        port = int(proxy.url.rsplit(":", 1)[1])
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(f"GET http://{name}:9/ HTTP/1.1\r\nHost: {name}:9\r\n\r\n".encode())
        await writer.drain()
        answer = (await reader.read()).decode()
        writer.close()
    finally:
        await proxy.close()
    if all(OriginPolicy().check_origin(("http",), "x", 9, (a,)) is None for a in addresses):
        assert "403" not in answer.split("\r\n", 1)[0]
    else:
        assert answer.startswith("HTTP/1.1 403 Forbidden")
        assert "X-Aleph-Browser-Policy: blocked" in answer
        assert proxy.refusals and "block_private_addresses is on" in proxy.refusals[0][1]


async def test_navigation_to_a_blocked_origin_is_refused_before_loading(call: Any, site: Any) -> None:
    with pytest.raises(aleph.PermissionDenied) as info:
        await call("browser_navigate", {"url": f"http://localhost:{site.port}/form"})
    assert (
        f"http://localhost:{site.port}/form was not opened: "
        f"http://localhost:{site.port} is not in [browser] allowed_origins" in str(info.value)
    )


async def test_redirect_chain_to_a_blocked_origin_is_stopped(call: Any, site: Any) -> None:
    with pytest.raises(aleph.PermissionDenied) as info:
        await call("browser_navigate", {"url": site.url("/r1")})
    message = str(info.value)
    assert f"navigation to {site.url('/r1')} was stopped at http://localhost:{site.port}/final" in message
    assert "is not in [browser] allowed_origins" in message


async def test_redirect_after_a_click_is_stopped_and_reported(call: Any, site: Any) -> None:
    await call("browser_navigate", {"url": site.url("/link-redirect"), "snapshot": "none"})
    out = await call("browser_click", {"target": "text=Go away", "snapshot": "none"})
    out += await call("browser_wait_for", {"text": "blocked by the browser origin policy", "snapshot": "none"})
    assert f"Blocked requests:\n- http://localhost:{site.port}/final: http://localhost:{site.port} is not in" in out


async def test_subresources_and_their_redirect_hops_are_blocked(call: Any, site: Any) -> None:
    out = await call("browser_navigate", {"url": site.url("/subresource"), "snapshot": "none"})
    assert "Blocked requests:" in out
    assert (
        f"http://localhost:{site.port}/pixel.png: http://localhost:{site.port} is not in [browser] allowed_origins"
        in out
    )
    # The script answers 302 to localhost: only the proxy sees that hop, and it refuses it.
    assert f"http://localhost:{site.port}/evil.js" in out
    failed = await call("browser_network", {"failed_only": True})
    assert any("pixel.png" in r["url"] and "allowed_origins" in r.get("blocked", "") for r in failed["requests"])


async def test_private_addresses_are_blocked_in_the_browser(make_rt: Any, tmp_path: Path, site: Any) -> None:
    rt = make_rt(tmp_path, "")
    async with rt:
        service = aleph.UnscopedToolService(rt.registry)
        with pytest.raises(aleph.PermissionDenied, match=r"is a loopback address .* block_private_addresses is on"):
            await service.execute("browser_open", {"url": site.url("/form")})
        page = f'data:text/html,<p>hi</p><img src="http://127.0.0.1:{site.port}/form">'
        out = (await service.execute("browser_open", {"url": page, "snapshot": "none"})).value
        assert f"- http://127.0.0.1:{site.port}/form: http://127.0.0.1:{site.port} is a loopback address" in out


async def test_webrtc_udp_does_not_bypass_the_policy_proxy(call: Any) -> None:
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    udp.setblocking(False)
    port = udp.getsockname()[1]
    try:
        await call("browser_navigate", {"url": "data:text/html,<p>rtc</p>", "snapshot": "none"})
        script = (
            f"() => {{ const pc = new RTCPeerConnection({{iceServers: [{{urls: 'stun:127.0.0.1:{port}'}}]}});"
            " pc.createDataChannel('x'); return pc.createOffer().then(o => pc.setLocalDescription(o)).then(() => 1); }"
        )
        await call("browser_evaluate", {"function": script})
        # Without the policy flag a STUN binding request reaches this socket within milliseconds.
        await call("browser_wait_for", {"seconds": 2, "snapshot": "none"})
        with pytest.raises(BlockingIOError):
            udp.recvfrom(2048)
    finally:
        udp.close()
