"""The family's configuration: ``[channel_adapters.<name>]``, ``[channel_pairing]`` and ``[google_meet]``.

An adapter's name is also its channel: requests that arrive through adapter ``ops`` are served under the
``[channels.ops]`` permission layer, and ``ask_user`` in such a request asks on that adapter.
"""

from __future__ import annotations

import ipaddress
import os
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = [
    "EmailSettings",
    "IrcSettings",
    "MeetSettings",
    "PairingSettings",
    "WebhookSettings",
    "secret_from_env",
]

MiB = 1024 * 1024


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _AdapterBase(_Strict):
    kind: str
    """Which adapter: ``irc``, ``email``, ``webhook`` or a plugin's kind."""
    paired_only: bool = True
    """Only paired senders reach an agent; unknown senders get a one-time pairing code (keep it on)."""


class IrcSettings(_AdapterBase):
    """``kind = "irc"``: a bot on an IRC network, answering direct messages and joined rooms."""

    kind: Literal["irc"] = "irc"
    host: str
    port: int = Field(default=6697, ge=1, le=65535)
    tls: bool = True
    """TLS to the server (plain only for a server on loopback)."""
    nick: str = Field(default="aleph", pattern=r"^[A-Za-z\[\]\\`_^{|}][A-Za-z0-9\[\]\\`_^{|}-]{0,29}$")
    password_env: str | None = None
    """Environment variable holding the server password, if any (never the password itself)."""
    join: list[str] = Field(default_factory=list, max_length=50)
    """Rooms to join (``#ops``); direct messages work without any."""

    @model_validator(mode="after")
    def _plain_only_on_loopback(self) -> IrcSettings:
        if not self.tls and not _is_loopback(self.host):
            raise ValueError(f"tls = false is allowed only for a server on loopback, not {self.host!r}")
        return self


class EmailSettings(_AdapterBase):
    """``kind = "email"``: mail out through SMTP, replies in through an SMTP listener of its own."""

    kind: Literal["email"] = "email"
    smtp_host: str
    smtp_port: int = Field(default=587, ge=1, le=65535)
    starttls: bool = True
    username: str | None = None
    password_env: str | None = None
    from_address: str = Field(pattern=r"^[^@\s]+@[^@\s]+$")
    listen_host: str = "127.0.0.1"
    """Where replies arrive (point the domain's MX, or a forwarding rule, here)."""
    listen_port: int = Field(default=0, ge=0, le=65535)
    """0: no inbound mail (send only)."""
    max_media_bytes: int = Field(default=10 * MiB, ge=0, le=50 * MiB)


class WebhookSettings(_AdapterBase):
    """``kind = "webhook"``: posts to a Slack- or Discord-style incoming webhook (send only)."""

    kind: Literal["webhook"] = "webhook"
    url_env: str
    """Environment variable holding the webhook URL (it is a secret: whoever has it can post)."""
    style: Literal["slack", "discord", "generic"] = "generic"
    max_media_bytes: int = Field(default=8 * MiB, ge=0, le=25 * MiB)
    """Discord and generic hooks take files (multipart); Slack incoming webhooks take none."""


class PairingSettings(_Strict):
    """``[channel_pairing]``: how long codes and pairings live."""

    code_ttl_s: int = Field(default=900, ge=60, le=86_400)
    """A one-time code is good for this long (default 15 minutes)."""
    pairing_ttl_days: int = Field(default=90, ge=1, le=3650)
    """An approved pairing lapses after this many days; the sender pairs again."""
    max_pending: int = Field(default=200, ge=1, le=10_000)
    """Unanswered codes kept at once; beyond it the oldest are dropped (a flood cannot grow the store)."""


class MeetSettings(_Strict):
    """``[google_meet]``: the Google Meet REST API (v2)."""

    api_base: str = "https://meet.googleapis.com/v2"
    token_env: str = "GOOGLE_MEET_ACCESS_TOKEN"
    """Environment variable holding an OAuth access token with a Meet scope."""
    refresh_token_env: str | None = None
    """Or: a refresh token, exchanged at ``token_uri`` with the client id and secret below."""
    client_id_env: str | None = None
    client_secret_env: str | None = None
    token_uri: str = "https://oauth2.googleapis.com/token"
    timeout_s: float = Field(default=20.0, gt=0, le=120)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def secret_from_env(name: str | None) -> str | None:
    """The value of environment variable ``name`` (None when unset, empty or no name is configured)."""
    if not name:
        return None
    value = os.environ.get(name, "")
    return value or None
