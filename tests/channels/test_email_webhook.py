"""The e-mail adapter against real SMTP servers (aiosmtpd), the webhook adapter against a local HTTP server."""

from __future__ import annotations

import asyncio
import json
import re
import smtplib
from email import policy
from email.message import EmailMessage
from email.parser import BytesParser
from pathlib import Path
from typing import Any

import aleph_channels
import pytest
from aiosmtpd.controller import Controller

import aleph

from .conftest import runtime
from .servers import free_port, http_server

pytestmark = pytest.mark.anyio


class MailServer:
    """The outgoing mail server: a real SMTP server (aiosmtpd) that keeps what it was given."""

    def __init__(self) -> None:
        self.messages: asyncio.Queue[EmailMessage] = asyncio.Queue()
        self.loop = asyncio.get_running_loop()

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        message = BytesParser(policy=policy.default).parsebytes(envelope.original_content or envelope.content)
        self.loop.call_soon_threadsafe(self.messages.put_nowait, message)
        return "250 OK"


@pytest.fixture
async def mail(workspace: Path):
    server = MailServer()
    controller = Controller(server, hostname="127.0.0.1", port=free_port())
    controller.start()
    inbound = free_port()
    config = f"""
[channel_adapters.mail]
kind = "email"
smtp_host = "127.0.0.1"
smtp_port = {controller.port}
starttls = false
from_address = "agent@example.test"
listen_port = {inbound}
"""
    async with runtime(workspace, config) as rt:
        await aleph_channels.channel_hub(rt).ensure_started("mail")
        yield rt, server, inbound
    controller.stop()


def reply(port: int, sender: str, text: str, quoted: str = "") -> None:
    message = EmailMessage()
    message["From"], message["To"], message["Subject"] = sender, "agent@example.test", "Re: Message from your agent"
    message.set_content(text + (f"\n\nOn Mon, Agent wrote:\n> {quoted}" if quoted else ""))
    with smtplib.SMTP("127.0.0.1", port, timeout=20) as smtp:
        smtp.send_message(message)


async def test_mail_pairing_then_ask_user_by_reply(mail) -> None:
    rt, server, inbound = mail
    await asyncio.to_thread(reply, inbound, "Ana <ana@example.test>", "hello")
    coded = await asyncio.wait_for(server.messages.get(), 20)
    assert coded["To"] == "ana@example.test"
    code = re.search(r"pairing code is ([A-Z0-9]{4}-[A-Z0-9]{4})", coded.get_content()).group(1)  # type: ignore[union-attr]
    op = rt.tool_service(agent="alice", turn=aleph.TurnContext(session_key="op", caller_role="operator"))
    assert (await op.call("channel_pairing", {"action": "approve", "code": code})).success
    turn = aleph.TurnContext(session_key="m", channel_id="mail", conversation_id="ana@example.test")
    asking = asyncio.ensure_future(
        rt.tool_service(agent="alice", channel="mail", turn=turn).call("ask_user", {"question": "Budget for Q3?"})
    )
    question = await asyncio.wait_for(server.messages.get(), 20)
    assert question.get_content().strip() == "Budget for Q3?"
    await asyncio.to_thread(reply, inbound, "ana@example.test", "40k", quoted="Budget for Q3?")
    result = await asking
    assert result.success, result.error
    assert json.loads(result.output)["answer"] == "40k"  # the quoted original is not part of the answer


async def test_media_send_mails_a_workspace_file_as_an_attachment(mail, workspace: Path) -> None:
    rt, server, _ = mail
    (workspace / "chart.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"0" * 100)
    turn = aleph.TurnContext(session_key="m", channel_id="mail", conversation_id="ana@example.test")
    service = rt.tool_service(agent="alice", channel="mail", turn=turn, tier="auto")
    result = await service.call("media_send", {"path": "chart.png", "caption": "Here is the chart."})
    assert result.success, result.error
    sent = await asyncio.wait_for(server.messages.get(), 20)
    [attachment] = list(sent.iter_attachments())
    assert attachment.get_filename() == "chart.png" and attachment.get_content_type() == "image/png"
    assert attachment.get_content() == (workspace / "chart.png").read_bytes()


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("../outside.txt", "outside the workspace"),
        ("link.txt", "outside the workspace"),
        (".aleph-data/channels/pairings.sqlite3", "Aleph's own files"),
        ("missing.txt", "no file"),
    ],
)
async def test_media_send_is_confined_to_the_workspace(mail, workspace: Path, path: str, why: str) -> None:
    rt, _, _ = mail
    (workspace.parent / "outside.txt").write_text("secret")
    (workspace / "link.txt").symlink_to(workspace.parent / "outside.txt")
    turn = aleph.TurnContext(session_key="m", channel_id="mail", conversation_id="ana@example.test")
    service = rt.tool_service(agent="alice", channel="mail", turn=turn, tier="auto")
    result = await service.call("media_send", {"path": path})
    assert not result.success and why in result.error


async def test_media_send_needs_a_channel_to_send_to(mail, workspace: Path) -> None:
    rt, _, _ = mail
    (workspace / "a.txt").write_text("x")
    result = await rt.tool_service(agent="alice", tier="auto").call("media_send", {"path": "a.txt"})
    assert not result.success and "no channel adapter" in result.error


@pytest.fixture
def hook(monkeypatch: pytest.MonkeyPatch):
    url, recorded, stop = http_server(lambda request, body: (204, None))
    monkeypatch.setenv("TEST_HOOK_URL", url + "/hook")
    yield recorded
    stop()


def hook_config(style: str) -> str:
    return f'[channel_adapters.team]\nkind = "webhook"\nstyle = "{style}"\nurl_env = "TEST_HOOK_URL"\n'


async def test_discord_style_webhook_posts_text_and_files(workspace: Path, hook) -> None:
    (workspace / "notes.txt").write_text("hello")
    async with runtime(workspace, hook_config("discord")) as rt:
        turn = aleph.TurnContext(session_key="w", channel_id="team", conversation_id="general")
        service = rt.tool_service(agent="alice", channel="team", turn=turn, tier="auto")
        result = await service.call("media_send", {"path": "notes.txt", "caption": "the notes"})
        assert result.success, result.error
    [request] = hook.requests
    assert request["path"] == "/hook" and request["headers"]["Content-Type"].startswith("multipart/form-data")
    assert b'filename="notes.txt"' in request["body"] and b'"content": "the notes"' in request["body"]


async def test_slack_style_webhook_takes_no_files_and_cannot_ask(workspace: Path, hook) -> None:
    (workspace / "notes.txt").write_text("hello")
    async with runtime(workspace, hook_config("slack")) as rt:
        turn = aleph.TurnContext(session_key="w", channel_id="team", conversation_id="general")
        service = rt.tool_service(agent="alice", channel="team", turn=turn, tier="auto")
        sent = await service.call("media_send", {"path": "notes.txt"})
        asked = await service.call("ask_user", {"question": "ok?"})
    assert not sent.success and "Slack incoming webhooks take text only" in sent.error
    assert not asked.success and "can send but not receive" in asked.error
    assert hook.requests == []


async def test_a_webhook_without_its_url_says_what_to_set(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TEST_HOOK_URL", raising=False)
    (workspace / "notes.txt").write_text("hello")
    async with runtime(workspace, hook_config("generic")) as rt:
        turn = aleph.TurnContext(session_key="w", channel_id="team", conversation_id="general")
        service = rt.tool_service(agent="alice", channel="team", turn=turn, tier="auto")
        result = await service.call("media_send", {"path": "notes.txt"})
    assert not result.success and "set the environment variable TEST_HOOK_URL" in result.error
