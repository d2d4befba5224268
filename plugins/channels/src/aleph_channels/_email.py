"""The e-mail adapter: mail out through an SMTP server, replies in through an SMTP listener of its own.

Outgoing mail goes through the configured submission server (STARTTLS and login when configured) with
the standard library's :mod:`smtplib` in a worker thread. Incoming mail is received by an
``aiosmtpd`` SMTP listener on the running event loop: point a domain's MX, or a forwarding rule of the
mail server, at it. The conversation is the sender's address; the text is the reply's plain-text part
without the quoted original.

The sender of an e-mail is what the envelope says. A pairing is only as strong as the checks of the mail
server in front of this listener (SPF, DKIM): expose the listener to a server that does them, never
directly to the internet.
"""

from __future__ import annotations

import asyncio
import re
import smtplib
import ssl
import time
from email import policy
from email.message import EmailMessage
from email.parser import BytesParser
from email.utils import parseaddr
from pathlib import Path

from aiosmtpd.smtp import SMTP, Envelope, Session

from aleph_channels._adapter import ChannelUnavailable, Deliver, Inbound, MediaLimits
from aleph_channels._config import EmailSettings, secret_from_env

__all__ = ["EmailAdapter", "reply_text"]

MAX_INBOUND_BYTES = 1024 * 1024
"""Largest inbound message accepted (replies are short; attachments are not read)."""
SMTP_TIMEOUT_S = 30.0
_QUOTE_HEADER = re.compile(r"^\s*(On .{0,200} wrote:|-----Original Message-----|From: .+)\s*$")


def reply_text(message: EmailMessage) -> str:
    """The plain-text body of a reply, without the quoted original below it."""
    part = message.get_body(preferencelist=("plain",))
    if part is None:
        return ""
    try:
        body = str(part.get_content())
    except (LookupError, ValueError):
        return ""
    lines: list[str] = []
    for line in body.splitlines():
        if line.startswith(">") or _QUOTE_HEADER.match(line):
            break
        lines.append(line)
    return "\n".join(lines).strip()[:20_000]


class _Handler:
    def __init__(self, adapter: EmailAdapter) -> None:
        self.adapter = adapter

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        content = envelope.original_content or envelope.content or b""
        if isinstance(content, str):
            content = content.encode()
        message = BytesParser(policy=policy.default).parsebytes(content)
        sender = parseaddr(str(envelope.mail_from or ""))[1].lower()
        if not sender or "@" not in sender:
            return "550 a reply needs a sender address"
        attachments = tuple(str(part.get_filename() or "attachment") for part in message.iter_attachments())
        deliver = self.adapter._deliver
        if deliver is not None:
            await deliver(Inbound(self.adapter.name, sender, sender, reply_text(message), time.time(), attachments))
        return "250 OK"


class EmailAdapter:
    """One mailbox (``kind = "email"``)."""

    kind = "email"

    def __init__(self, name: str, settings: EmailSettings) -> None:
        self.name = name
        self.settings = settings
        self.can_receive = settings.listen_port != 0
        self.limits = MediaLimits(settings.max_media_bytes)
        self._deliver: Deliver | None = None
        self._server: asyncio.AbstractServer | None = None

    @property
    def listening_port(self) -> int | None:
        """The port the inbound listener is bound to (when configured)."""
        if self._server is None or not self._server.sockets:
            return None
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self, deliver: Deliver) -> None:
        """Start the inbound listener (when configured)."""
        self._deliver = deliver
        if not self.can_receive:
            return
        loop = asyncio.get_running_loop()
        handler = _Handler(self)
        try:
            self._server = await loop.create_server(
                lambda: SMTP(handler, data_size_limit=MAX_INBOUND_BYTES, hostname="aleph", loop=loop),
                self.settings.listen_host,
                self.settings.listen_port,
            )
        except OSError as exc:
            raise ChannelUnavailable(
                f"cannot listen for mail on {self.settings.listen_host}:{self.settings.listen_port}: {exc.strerror}"
            ) from None

    async def stop(self) -> None:
        """Stop the listener."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def send_text(self, conversation: str, text: str) -> None:
        """Mail ``text`` to the address ``conversation``."""
        message = self._message(conversation, text)
        await asyncio.to_thread(self._submit, message)

    async def send_media(self, conversation: str, path: Path, media_type: str, caption: str) -> None:
        """Mail the file as an attachment."""
        message = self._message(conversation, caption or f"{path.name} attached.")
        maintype, _, subtype = media_type.partition("/")
        message.add_attachment(
            path.read_bytes(), maintype=maintype, subtype=subtype or "octet-stream", filename=path.name
        )
        await asyncio.to_thread(self._submit, message)

    def _message(self, to: str, text: str) -> EmailMessage:
        if "@" not in parseaddr(to)[1]:
            raise ChannelUnavailable(f"{to!r} is not an e-mail address")
        message = EmailMessage()
        message["From"] = self.settings.from_address
        message["To"] = to
        message["Subject"] = "Message from your agent"
        message.set_content(text)
        return message

    def _submit(self, message: EmailMessage) -> None:
        s = self.settings
        try:
            with smtplib.SMTP(s.smtp_host, s.smtp_port, timeout=SMTP_TIMEOUT_S) as smtp:
                if s.starttls:
                    smtp.starttls(context=ssl.create_default_context())
                password = secret_from_env(s.password_env)
                if s.username and password:
                    smtp.login(s.username, password)
                smtp.send_message(message)
        except (OSError, smtplib.SMTPException) as exc:
            raise ChannelUnavailable(
                f"mail server {s.smtp_host}:{s.smtp_port} did not take the message: {exc}"
            ) from None
