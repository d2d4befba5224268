"""The data directory's approval inbox: an ask made in one process is answered in ``aleph console`` in another.

A real ``aleph serve`` child asks (its MCP client cannot), the console in this process shows the ask in
Chromium and the click lets the call run. In-process, the inbox is asked beside the host's requester: the
first answer wins and the other ask is withdrawn. The files are private to their owner.
"""

from __future__ import annotations

import asyncio
import os
import stat
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters

import aleph
from aleph._chokepoint._approval import ApprovalOutcome, ApprovalRequest, ApprovalResponse
from aleph._chokepoint._askstore import AskStore, console_running
from aleph._console import Console

from .conftest import until

pytestmark = pytest.mark.anyio

ALEPH = str(Path(sys.executable).parent / "aleph")
ARGS = {"text": "one two"}


def serve_params(workspace: Path) -> StdioServerParameters:
    env = {k: v for k, v in os.environ.items() if k.startswith(("XDG_", "ALEPH_", "HOME", "PATH"))}
    return StdioServerParameters(command=ALEPH, args=["serve"], cwd=str(workspace), env=env)


def text(result: types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


class Plugin:
    ALEPH_PLUGIN_NAME = "inbox_fixture"

    @aleph.hookimpl
    def aleph_register_tools(self, register: aleph.ToolRegistrar) -> None:
        @aleph.tool
        def deploy(target: str) -> str:
            """Deploy (fixture)."""
            return f"deployed {target}"

        register(deploy)


async def load(workspace: Path, inbox: str | None = None) -> aleph.Aleph:
    config = '[policies.tool_permissions.overrides]\ndeploy = "ask"\ntext_stats = "ask"\n'
    if inbox is not None:
        config += f"[console]\ninbox = {inbox}\n"
    (workspace / "aleph.toml").write_text(config)
    return aleph.load(plugins=[Plugin()], entry_points=True, strict=True)


@pytest.fixture
async def console(workspace: Path) -> AsyncIterator[Console]:
    async with await load(workspace) as rt:
        con = Console(rt, timeout_s=60)
        await con.start()
        try:
            yield con
        finally:
            await con.stop()


class Waiting:
    """A requester that never answers until told to (a terminal nobody types into)."""

    def __init__(self, answer: ApprovalOutcome | None = None) -> None:
        self.answer = answer
        self.asked = asyncio.Event()
        self.release = asyncio.Event()
        self.cancelled = False

    async def request_approval(self, request: ApprovalRequest) -> ApprovalResponse:
        self.asked.set()
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        assert self.answer is not None
        return ApprovalResponse(self.answer)


async def test_an_ask_of_aleph_serve_is_answered_in_the_console_and_the_call_runs(
    console: Console, workspace: Path, page: Any
) -> None:
    # The client declares no elicitation: without the console, nobody could be asked and the call would not run.
    async with Client(serve_params(workspace), mode="legacy") as client:
        call = asyncio.create_task(client.call_tool("text_stats", ARGS))
        cards = await until(console.cards, "the serve child's ask in the console's inbox")
        assert [c.tool for c in cards] == ["text_stats"]
        assert "aleph serve" in cards[0].origin and "text=one two" in cards[0].summary
        await page.goto(console.url)
        card = page.locator("section.ask")
        assert "text_stats" in await card.inner_text()
        assert "aleph serve (pid" in await card.inner_text()
        await page.click('button[data-decision="allow_once"]')
        result = await asyncio.wait_for(call, 30)
        assert not result.is_error, text(result)
        assert '"words":2' in text(result)
        await page.wait_for_selector("#empty")
        # Once means once: the next call asks again, and "no" with a reason reaches the model.
        again = asyncio.create_task(client.call_tool("text_stats", ARGS))
        cards = await until(console.cards, "the second ask")
        assert console.answer(cards[0].id, "deny", "not today") is None
        refused = await asyncio.wait_for(again, 30)
    assert refused.is_error and 'The user said: "not today"' in text(refused)


async def test_without_a_console_the_serve_client_that_cannot_ask_is_refused(workspace: Path) -> None:
    (workspace / "aleph.toml").write_text('[policies.tool_permissions.overrides]\ntext_stats = "ask"\n')
    async with Client(serve_params(workspace), mode="legacy") as client:
        result = await client.call_tool("text_stats", ARGS)
    assert result.is_error and "did not declare the elicitation capability" in text(result)


async def test_the_inbox_files_are_private_to_their_owner(console: Console) -> None:
    async with await load(Path.cwd()) as rt:
        task = asyncio.create_task(rt.tool_service(requester=Waiting()).execute("deploy", {"target": "x"}))
        cards = await until(console.cards, "the ask")
        console.answer(cards[0].id, "deny")
        with pytest.raises(aleph.ApprovalDenied):
            await task
    directory = console.shared.directory
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    files = sorted(p.name for p in directory.iterdir())
    assert {"inbox.sqlite3", "inbox.sqlite3-wal", "inbox.sqlite3-shm"} <= set(files)
    for name in files:
        assert stat.S_IMODE((directory / name).stat().st_mode) & 0o077 == 0, name


async def test_the_console_answering_first_cancels_the_other_asker(console: Console, workspace: Path) -> None:
    terminal = Waiting()
    async with await load(workspace) as rt:
        task = asyncio.create_task(rt.tool_service(requester=terminal).execute("deploy", {"target": "prod"}))
        cards = await until(console.cards, "the ask")
        await terminal.asked.wait()  # both were asked at once
        assert console.answer(cards[0].id, "allow_once") is None
        assert (await task).text == "deployed prod"
    assert terminal.cancelled


async def test_the_other_asker_answering_first_withdraws_the_card(console: Console, workspace: Path) -> None:
    terminal = Waiting(ApprovalOutcome.APPROVED)
    async with await load(workspace) as rt:
        task = asyncio.create_task(rt.tool_service(requester=terminal).execute("deploy", {"target": "prod"}))
        cards = await until(console.cards, "the ask")
        terminal.release.set()
        assert (await task).text == "deployed prod"
        assert console.cards() == []
        assert console.answer(cards[0].id, "deny") is not None  # too late: it is no longer waiting
        row = console.shared.get(cards[0].id)
        assert row is not None and row.state == "withdrawn"


async def test_a_requester_that_cannot_ask_leaves_the_wait_to_the_console(console: Console, workspace: Path) -> None:
    async with await load(workspace) as rt:
        nobody = aleph.ScriptedRequester([ApprovalOutcome.UNAVAILABLE])  # "stdin is not a terminal"
        task = asyncio.create_task(rt.tool_service(requester=nobody).execute("deploy", {"target": "prod"}))
        cards = await until(console.cards, "the ask")
        assert console.answer(cards[0].id, "allow_session") is None
        assert (await task).text == "deployed prod"


async def test_the_first_answer_wins_and_a_second_is_refused(console: Console, workspace: Path) -> None:
    async with await load(workspace) as rt:
        task = asyncio.create_task(rt.tool_service(requester=Waiting()).execute("deploy", {"target": "prod"}))
        cards = await until(console.cards, "the ask")
        other = AskStore(console.shared.directory)  # a second console on the same data directory
        assert other.answer(cards[0].id, "deny", "no") is None
        assert "no longer waiting" in str(console.answer(cards[0].id, "allow_once"))
        with pytest.raises(aleph.ApprovalDenied, match='"no"'):
            await task
        other.close()


async def test_an_answer_the_ask_does_not_offer_is_refused(console: Console, workspace: Path) -> None:
    async with await load(workspace) as rt:
        task = asyncio.create_task(rt.tool_service(requester=Waiting()).execute("deploy", {"target": "prod"}))
        cards = await until(console.cards, "the ask")
        assert "unknown answer" in str(console.answer(cards[0].id, "yes please"))
        assert console.answer(cards[0].id, "allow_once") is None
        await task


async def test_auto_offers_only_while_a_console_runs_and_off_never(workspace: Path) -> None:
    async with await load(workspace) as rt:
        assert not console_running(rt.inbox.directory)
        assert not rt.inbox.offered()
        response = await rt.inbox.ask(_request())
        assert response.outcome is ApprovalOutcome.UNAVAILABLE
        con = Console(rt)
        await con.start()
        try:
            assert console_running(rt.inbox.directory)
        finally:
            await con.stop()
        assert not console_running(rt.inbox.directory)
    async with await load(workspace, inbox="false") as rt:
        con = Console(rt)
        await con.start()
        try:
            assert not rt.inbox.offered()
            with pytest.raises(aleph.ApprovalUnavailable):
                await rt.tool_service().execute("deploy", {"target": "x"})
        finally:
            await con.stop()


async def test_inbox_true_offers_without_a_console_until_one_answers(workspace: Path) -> None:
    async with await load(workspace, inbox="true") as rt:
        task = asyncio.create_task(rt.tool_service().execute("deploy", {"target": "later"}))
        store = AskStore(rt.inbox.directory)  # the console is started after the ask
        asks = await until(store.pending, "the ask, with no console running")
        con = Console(rt)
        assert [c.tool for c in con.cards()] == ["deploy"]
        assert con.answer(asks[0].id, "allow_once") is None
        assert (await task).text == "deployed later"
        store.close()


async def test_an_ask_past_its_expiry_is_nobody_answered(workspace: Path) -> None:
    async with await load(workspace, inbox="true") as rt:
        rt.inbox.timeout = 0.2
        with pytest.raises(aleph.ApprovalExpired):
            await rt.tool_service().execute("deploy", {"target": "x"})
        store = AskStore(rt.inbox.directory)
        assert store.pending() == []
        store.close()


async def test_an_ask_whose_process_ended_leaves_the_inbox(workspace: Path) -> None:
    store = AskStore(workspace / "inbox")
    ask_id = store.offer(
        {"tool": "deploy", "allowed": ["allow_once", "deny"]}, tool="deploy", expires_at=time.time() + 60, process="x"
    )
    assert ask_id is not None and [a.id for a in store.pending()] == [ask_id]
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    with store._locked() as db:
        db.execute("UPDATE asks SET pid = ? WHERE id = ?", (int(dead.stdout), ask_id))
    assert store.pending() == []
    row = store.get(ask_id)
    assert row is not None and row.state == "withdrawn"
    store.close()


async def test_a_bad_console_setting_fails_at_load_naming_it(workspace: Path) -> None:
    with pytest.raises(aleph.ConfigError, match=r"console\.inbox"):
        await load(workspace, inbox='"sometimes"')


def _request() -> ApprovalRequest:
    return ApprovalRequest("deploy", "deploy: target=x", "asked", "rule", (), "fp", {"target": "x"})


XSS = '<img src=x onerror="window.__xss=1"><script>window.__xss=2</script>'


async def test_for_the_session_and_always_have_their_usual_effect_from_another_process(
    console: Console, workspace: Path, page: Any
) -> None:
    async with await load(workspace) as rt:

        def service(session: str) -> aleph.ScopedToolService:
            return rt.tool_service(agent="ops", turn=aleph.TurnContext(session_key=session), requester=Waiting())

        task = asyncio.create_task(service("S").execute("deploy", {"target": XSS}))
        await until(console.cards, "the ask")
        await page.goto(console.url)
        card = await page.inner_text("section.ask")
        assert "<script>" in card and "ops" in card and "session S" in card
        assert await page.evaluate("window.__xss") is None and await page.locator("section.ask img").count() == 0
        await page.click('button[data-decision="allow_session"]')
        await task
        await service("S").execute("deploy", {"target": XSS})  # not asked again in session S
        task = asyncio.create_task(service("T").execute("deploy", {"target": XSS}))  # another session is asked
        cards = await until(console.cards, "the ask of session T")
        assert console.answer(cards[0].id, "allow_always") is None
        await task
        await service("U").execute("deploy", {"target": XSS})  # a standing grant: nobody is asked
        assert console.cards() == []


class Answers:
    """A requester that answers at once with a fixed response, or raises."""

    def __init__(self, answer: ApprovalResponse | BaseException) -> None:
        self.answer = answer

    async def request_approval(self, request: ApprovalRequest) -> ApprovalResponse:
        if isinstance(self.answer, BaseException):
            raise self.answer
        return self.answer


async def test_when_nobody_answers_anywhere_a_timeout_wins_over_unavailable() -> None:
    from aleph._chokepoint._alongside import FirstAnswer

    timeout = Answers(ApprovalResponse(ApprovalOutcome.TIMEOUT, "nobody at the terminal"))
    nobody = Answers(ApprovalResponse(ApprovalOutcome.UNAVAILABLE, "no console"))
    assert (await FirstAnswer((nobody, timeout)).request_approval(_request())).outcome is ApprovalOutcome.TIMEOUT
    broken = Answers(RuntimeError("the chat is down"))
    answer = await FirstAnswer((broken, nobody)).request_approval(_request())
    assert answer.outcome is ApprovalOutcome.UNAVAILABLE and "the chat is down" in str(answer.deny_reason)


async def test_a_requester_that_defers_the_call_ends_the_wait_at_once() -> None:
    from aleph._chokepoint._alongside import FirstAnswer

    waiting = Waiting()
    deferring = Answers(aleph.ApprovalRequired("deploy", _request()))
    with pytest.raises(aleph.ApprovalRequired):
        await FirstAnswer((waiting, deferring)).request_approval(_request())
    assert waiting.cancelled
