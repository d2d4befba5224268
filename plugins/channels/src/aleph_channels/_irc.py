"""The IRC adapter: a bot on one network, through jaraco's ``irc`` library on the running event loop.

A direct message is a conversation with its sender; a message in a joined room is a conversation in that
room. The sender is the server-reported ``nick!user@host`` mask, not the bare nick: on a network without
nick registration anyone can take a nick, but the host part comes from the server. IRC carries no files.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from pathlib import Path
from typing import Any

import irc.client
import irc.client_aio
import irc.connection

from aleph_channels._adapter import ChannelUnavailable, Deliver, Inbound, MediaLimits
from aleph_channels._config import IrcSettings, secret_from_env

__all__ = ["IrcAdapter", "split_for_irc"]

CONNECT_TIMEOUT_S = 20.0
MAX_LINE_BYTES = 400
"""A PRIVMSG line's text; the protocol's 512 bytes include the command, the target and the sender's mask."""
MAX_LINES = 40
"""Lines one send may take; longer text is cut with a note (and the network's flood control is spared)."""


def split_for_irc(text: str, limit: int = MAX_LINE_BYTES) -> list[str]:
    """Lines of at most ``limit`` UTF-8 bytes, split at newlines then at spaces, never inside a character."""
    out: list[str] = []
    for raw in text.replace("\r", "").split("\n"):
        line = raw.rstrip()
        while len(line.encode()) > limit:
            cut = len(line.encode()[:limit].decode(errors="ignore"))
            space = line.rfind(" ", 0, cut)
            cut = space if space > cut // 2 else cut
            out.append(line[:cut])
            line = line[cut:].lstrip()
        out.append(line or " ")
    if len(out) > MAX_LINES:
        out = [*out[: MAX_LINES - 1], f"[... {len(out) - MAX_LINES + 1} more lines not sent]"]
    return out


class IrcAdapter:
    """One IRC connection (``kind = "irc"``)."""

    kind = "irc"
    can_receive = True
    limits = MediaLimits(0, notes="IRC carries text only; publish the file where the reader can fetch it")

    def __init__(self, name: str, settings: IrcSettings) -> None:
        self.name = name
        self.settings = settings
        self._conn: irc.client_aio.AioConnection | None = None
        self._deliver: Deliver | None = None
        self._welcomed: asyncio.Event | None = None
        self._failure: str | None = None

    async def start(self, deliver: Deliver) -> None:
        """Connect, register and join the configured rooms; returns once the server welcomed the bot."""
        loop = asyncio.get_running_loop()
        self._deliver = deliver
        self._welcomed = asyncio.Event()
        reactor = irc.client_aio.AioReactor(loop=loop)
        for event in ("welcome", "privmsg", "pubmsg", "nicknameinuse", "error", "disconnect"):
            reactor.add_global_handler(event, self._on_event)
        factory: Any = None
        if self.settings.tls:
            factory = irc.connection.AioFactory(ssl=ssl.create_default_context())
        conn = reactor.server()
        try:
            await asyncio.wait_for(
                conn.connect(
                    self.settings.host,
                    self.settings.port,
                    self.settings.nick,
                    password=secret_from_env(self.settings.password_env),
                    connect_factory=factory or irc.connection.AioFactory(),
                ),
                CONNECT_TIMEOUT_S,
            )
            await asyncio.wait_for(self._welcomed.wait(), CONNECT_TIMEOUT_S)
        except (OSError, TimeoutError, irc.client.ServerConnectionError) as exc:
            conn.disconnect()
            raise ChannelUnavailable(
                f"IRC server {self.settings.host}:{self.settings.port} not reachable: {exc or 'timed out'}"
            ) from None
        if self._failure:
            raise ChannelUnavailable(f"IRC server {self.settings.host} refused the bot: {self._failure}")
        self._conn = conn
        for room in self.settings.join:
            conn.join(room)

    def _on_event(self, conn: Any, event: irc.client.Event) -> None:
        kind = event.type
        if kind == "welcome" and self._welcomed is not None:
            self._welcomed.set()
        elif kind == "nicknameinuse":
            conn.nick(conn.get_nickname() + "_")
        elif kind in ("error", "disconnect"):
            self._failure = " ".join(str(a) for a in event.arguments) or kind
            if self._welcomed is not None:
                self._welcomed.set()
            self._conn = None
        elif kind in ("privmsg", "pubmsg") and self._deliver is not None and event.arguments:
            source = str(event.source)
            nick = source.split("!", 1)[0]
            conversation = nick if kind == "privmsg" else str(event.target)
            message = Inbound(self.name, source, conversation, str(event.arguments[0]), time.time())
            asyncio.get_running_loop().create_task(self._deliver(message))

    async def stop(self) -> None:
        """Quit the network."""
        if self._conn is not None:
            self._conn.disconnect("bye")
            self._conn = None

    async def send_text(self, conversation: str, text: str) -> None:
        """Send ``text`` as one PRIVMSG per line."""
        if self._conn is None or not self._conn.is_connected():
            raise ChannelUnavailable(f"IRC adapter {self.name!r} is not connected")
        for line in split_for_irc(text):
            self._conn.privmsg(conversation, line)

    async def send_media(self, conversation: str, path: Path, media_type: str, caption: str) -> None:
        """IRC carries no files."""
        raise ChannelUnavailable(self.limits.check(1, media_type) or "IRC carries no files")
