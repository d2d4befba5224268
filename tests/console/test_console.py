"""``aleph console`` in a real Chromium (Playwright, Debian's chromium): answering an ask in the page lets the
waiting call run with the same effect as any other requester's answer, a request without the token is refused,
and tool output that tries markup stays text."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import aleph
from aleph._console import Console

pytestmark = pytest.mark.anyio

XSS = '<img src=x onerror="window.__xss=1"><script>window.__xss=2</script>'
RAN: list[str] = []


class Plugin:
    ALEPH_PLUGIN_NAME = "console_fixture"

    @aleph.hookimpl
    def aleph_register_tools(self, register: aleph.ToolRegistrar) -> None:
        @aleph.tool
        def deploy(target: str) -> str:
            """Deploy (fixture)."""
            RAN.append(target)
            return "deployed"

        @aleph.tool
        def publish(text: str) -> str:
            """Publish (fixture): fails with the text it was given, as a tool's error may."""
            raise aleph.ExecutionFailed("publish", f"could not publish {text}")

        register(deploy)
        register(publish)


@pytest.fixture
async def rt(workspace: Path) -> AsyncIterator[aleph.Aleph]:
    RAN.clear()
    (workspace / "aleph.toml").write_text('[policies.tool_permissions.overrides]\ndeploy = "ask"\npublish = "allow"\n')
    async with aleph.load(plugins=[Plugin()], entry_points=False, strict=True) as runtime:
        yield runtime


@pytest.fixture
async def console(rt: aleph.Aleph) -> AsyncIterator[Console]:
    con = Console(rt, timeout_s=60)
    await con.start()
    yield con
    await con.stop()


async def waiting(console: Console, n: int = 1) -> None:
    """Until ``n`` asks are in the inbox (on the inbox's change event, no sleeps)."""
    while len(console.inbox.pending()) < n:
        await console.inbox.changed.wait()


def service(rt: aleph.Aleph, console: Console, session: str = "S") -> aleph.ScopedToolService:
    return rt.tool_service(agent="ops", turn=aleph.TurnContext(session_key=session), requester=console.inbox)


async def test_answering_once_in_the_page_lets_the_waiting_call_run(
    rt: aleph.Aleph, console: Console, page: Any
) -> None:
    call = asyncio.create_task(service(rt, console).execute("deploy", {"target": "prod"}))
    await waiting(console)
    await page.goto(console.url)
    assert "deploy" in await page.inner_text("section.ask h3")
    started = time.perf_counter()
    await page.click('button[data-decision="allow_once"]')
    output = await asyncio.wait_for(call, 10)
    print(f"console round trip (click to the call's answer): {(time.perf_counter() - started) * 1000:.1f} ms")
    assert output.text == "deployed" and RAN == ["prod"]
    await page.wait_for_selector("#empty")
    # Once means once: the next identical call asks again.
    again = asyncio.create_task(service(rt, console).execute("deploy", {"target": "prod"}))
    await waiting(console)
    assert not again.done()
    console.inbox.answer(console.inbox.pending()[0].id, "deny")
    with pytest.raises(aleph.ApprovalDenied):
        await again


async def test_for_the_session_covers_the_same_call_in_that_session_only(
    rt: aleph.Aleph, console: Console, page: Any
) -> None:
    call = asyncio.create_task(service(rt, console).execute("deploy", {"target": "prod"}))
    await waiting(console)
    await page.goto(console.url)
    await page.click('button[data-decision="allow_session"]')
    await asyncio.wait_for(call, 10)
    await service(rt, console).execute("deploy", {"target": "prod"})  # not asked again in session S
    assert RAN == ["prod", "prod"] and console.inbox.pending() == []
    other = asyncio.create_task(service(rt, console, session="T").execute("deploy", {"target": "prod"}))
    await waiting(console)  # another session is asked
    console.inbox.answer(console.inbox.pending()[0].id, "deny")
    with pytest.raises(aleph.ApprovalDenied):
        await other


async def test_no_in_the_page_refuses_the_call_with_the_humans_reason(
    rt: aleph.Aleph, console: Console, page: Any
) -> None:
    call = asyncio.create_task(service(rt, console).execute("deploy", {"target": "prod"}))
    await waiting(console)
    await page.goto(console.url)
    await page.fill("input[name=reason]", "not on a Friday")
    await page.click('button[data-decision="deny"]')
    with pytest.raises(aleph.ApprovalDenied, match="not on a Friday"):
        await asyncio.wait_for(call, 10)
    assert RAN == []


@pytest.mark.parametrize("path", ["/", "/ledger", "/explain?tool=deploy"])
async def test_a_request_without_the_token_is_refused(console: Console, page: Any, path: str) -> None:
    base = f"http://127.0.0.1:{console.port}"
    for url in (base + path, base + path + ("&" if "?" in path else "?") + "token=wrong"):
        response = await page.goto(url)
        assert response.status == 403
        assert "refused" in await page.inner_text("body")
        assert "deploy" not in await page.inner_text("body")


async def test_a_post_without_the_token_answers_nothing(rt: aleph.Aleph, console: Console, page: Any) -> None:
    call = asyncio.create_task(service(rt, console).execute("deploy", {"target": "prod"}))
    await waiting(console)
    ask = console.inbox.pending()[0].id
    await page.goto(f"http://127.0.0.1:{console.port}/nothing")
    status = await page.evaluate(
        "async (id) => (await fetch('/answer', "
        "{method: 'POST', body: new URLSearchParams({id, decision: 'allow_once'})})).status",
        ask,
    )
    assert status == 403 and not call.done()
    console.inbox.answer(ask, "deny")
    with pytest.raises(aleph.ApprovalDenied):
        await call


async def test_markup_in_arguments_and_tool_output_stays_text(rt: aleph.Aleph, console: Console, page: Any) -> None:
    with pytest.raises(aleph.ExecutionFailed):
        await service(rt, console).execute("publish", {"text": XSS})
    call = asyncio.create_task(service(rt, console).execute("deploy", {"target": XSS}))
    await waiting(console)
    await page.goto(console.url)
    assert "<script>" in await page.inner_text("section.ask pre.args")
    await page.click('button[data-decision="deny"]')
    with pytest.raises(aleph.ApprovalDenied):
        await call
    ledger = rt.chokepoint.ledger
    assert ledger is not None
    await ledger.flush()
    await page.goto(console.url.replace("/?", "/ledger?"))
    table = await page.inner_text("#rows")
    assert "could not publish <img src=x" in table
    assert await page.evaluate("window.__xss") is None
    assert await page.locator("#rows img").count() == 0
    assert "verified" in await page.inner_text("#chains")


async def test_explain_shows_the_decision_rule_and_layer(console: Console, page: Any) -> None:
    await page.goto(console.url.replace("/?", "/explain?") + "&tool=deploy&input=%7B%22target%22%3A%22x%22%7D")
    table = await page.inner_text("#explain")
    assert "ask" in table and "deploy" in table and "global" in table
    await page.goto(console.url.replace("/?", "/explain?") + "&tool=deploy&input=%5B1%5D")
    assert "JSON object" in await page.inner_text("[role=alert]")


def test_aleph_console_serves_the_token_url_on_loopback(workspace: Path) -> None:
    import subprocess
    import sys
    import urllib.error
    import urllib.request

    aleph_bin = str(Path(sys.executable).parent / "aleph")
    proc = subprocess.Popen([aleph_bin, "console"], cwd=workspace, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()  # "aleph console: URL" once listening
        assert line.startswith("aleph console: http://127.0.0.1:"), line
        url = line.split(": ", 1)[1].strip()
        with urllib.request.urlopen(url, timeout=10) as ok:
            assert ok.status == 200 and "Approval inbox" in ok.read().decode()
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(url.split("?")[0], timeout=10)
        assert refused.value.code == 403
        refused.value.close()
    finally:
        proc.terminate()
        proc.wait(timeout=15)
        if proc.stderr is not None:
            proc.stderr.close()


def test_the_console_refuses_a_non_loopback_host(workspace: Path) -> None:
    import subprocess
    import sys

    aleph_bin = str(Path(sys.executable).parent / "aleph")
    done = subprocess.run(
        [aleph_bin, "console", "--host", "0.0.0.0"], cwd=workspace, capture_output=True, text=True, timeout=60
    )
    assert done.returncode != 0 and "loopback" in done.stderr
