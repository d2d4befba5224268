"""What a channel adapter is: the protocol every adapter implements, and the messages it carries.

An adapter connects Aleph to one place people talk (an IRC network, a mailbox, a webhook). It sends
text and media to a conversation and, when it can receive, hands every inbound message to the
:class:`~aleph_channels.ChannelHub`, which decides what happens to it (pairing, answers, the inbox).
Adapters know nothing about permissions: the hub and the tools do.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

__all__ = ["ChannelAdapter", "ChannelUnavailable", "Deliver", "Inbound", "MediaLimits"]


class ChannelUnavailable(Exception):
    """The adapter cannot do what was asked (not connected, cannot carry files, the server refused)."""


@dataclass(frozen=True, slots=True)
class Inbound:
    """One message received on a channel. Its text is untrusted content: nobody vouched for it."""

    adapter: str
    """The adapter (and channel layer) name it arrived on."""
    sender: str
    """Who sent it, as the channel identifies them (an IRC nick, an e-mail address)."""
    conversation: str
    """Where to answer: the sender for a direct message, else the room."""
    text: str
    received_at: float
    """Unix time."""
    attachments: tuple[str, ...] = ()
    """Names of attached files (not their content)."""


Deliver = Callable[[Inbound], Awaitable[None]]
"""What an adapter calls with every inbound message."""


@dataclass(frozen=True, slots=True)
class MediaLimits:
    """What one adapter can carry as a file."""

    max_bytes: int = 0
    """Largest file; 0 means the adapter carries no files."""
    media_types: tuple[str, ...] = ()
    """Accepted media types; a trailing ``/*`` accepts a whole family (``image/*``); empty means any."""
    notes: str = ""
    """Shown when a file is refused, e.g. why this channel carries none."""

    def check(self, size: int, media_type: str) -> str | None:
        """Why a file of ``size`` bytes and ``media_type`` cannot be sent, or None."""
        if self.max_bytes <= 0:
            return f"this channel carries no files{': ' + self.notes if self.notes else ''}"
        if size > self.max_bytes:
            return f"the file is {size:,} bytes; this channel carries at most {self.max_bytes:,}"
        if self.media_types and not any(_matches(media_type, t) for t in self.media_types):
            return f"media type {media_type} is not accepted here (accepted: {', '.join(self.media_types)})"
        return None


def _matches(media_type: str, pattern: str) -> bool:
    if pattern.endswith("/*"):
        return media_type.startswith(pattern[:-1])
    return media_type == pattern


@runtime_checkable
class ChannelAdapter(Protocol):
    """One connection to a channel. Methods are async and may do I/O; they raise :class:`ChannelUnavailable`."""

    name: str
    """The adapter's configured name; requests from it use the ``[channels.<name>]`` permission layer."""
    kind: str
    """``irc``, ``email``, ``webhook`` or a plugin's own kind."""
    can_receive: bool
    """Whether it delivers inbound messages (a plain outgoing webhook does not)."""
    limits: MediaLimits

    async def start(self, deliver: Deliver) -> None:
        """Connect and begin handing inbound messages to ``deliver``; returns once connected."""

    async def stop(self) -> None:
        """Disconnect; safe to call twice."""

    async def send_text(self, conversation: str, text: str) -> None:
        """Send ``text`` to ``conversation``."""

    async def send_media(self, conversation: str, path: Path, media_type: str, caption: str) -> None:
        """Send the file at ``path`` (already checked against :attr:`limits`) with an optional caption."""


@dataclass(slots=True)
class AdapterFactories:
    """Adapter kinds registered through ``aleph_channel_adapters``: kind → factory(name, settings, data_dir)."""

    factories: dict[str, Callable[..., ChannelAdapter]] = field(default_factory=dict)
    owners: dict[str, str] = field(default_factory=dict)

    def register(self, kind: str, factory: Callable[..., ChannelAdapter], owner: str) -> None:
        """Record ``factory`` for ``kind``; a kind registered twice is an error naming both plugins."""
        if kind in self.factories:
            raise ValueError(f"channel adapter kind {kind!r} is registered by {self.owners[kind]} and {owner}")
        self.factories[kind] = factory
        self.owners[kind] = owner
