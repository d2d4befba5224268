"""The webhook adapter: posts to a Slack-, Discord-style or generic incoming webhook (send only).

An incoming webhook's URL is a credential (whoever has it can post), so it is read from an environment
variable and never shown. Slack's incoming webhooks take text only; Discord's and the generic style take
a file as multipart form data.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from aleph_channels._adapter import ChannelUnavailable, Deliver, MediaLimits
from aleph_channels._config import WebhookSettings, secret_from_env

__all__ = ["WebhookAdapter"]

TIMEOUT_S = 20.0
DISCORD_MAX_CHARS = 2000
SLACK_MAX_CHARS = 40_000


class WebhookAdapter:
    """One incoming webhook (``kind = "webhook"``)."""

    kind = "webhook"
    can_receive = False

    def __init__(self, name: str, settings: WebhookSettings) -> None:
        self.name = name
        self.settings = settings
        if settings.style == "slack":
            self.limits = MediaLimits(0, notes="Slack incoming webhooks take text only")
        else:
            self.limits = MediaLimits(settings.max_media_bytes)

    def _url(self) -> str:
        url = secret_from_env(self.settings.url_env)
        if url is None:
            raise ChannelUnavailable(
                f"webhook {self.name!r} not configured: set the environment variable {self.settings.url_env} to its URL"
            )
        return url

    async def start(self, deliver: Deliver) -> None:
        """Nothing to connect: a webhook is posted to when there is something to say."""
        self._url()

    async def stop(self) -> None:
        """Nothing to close."""

    def _payload(self, conversation: str, text: str) -> dict[str, Any]:
        style = self.settings.style
        if style == "slack":
            return {"text": text[:SLACK_MAX_CHARS]}
        if style == "discord":
            return {"content": text[:DISCORD_MAX_CHARS], "allowed_mentions": {"parse": []}}
        return {"text": text, "conversation": conversation}

    async def send_text(self, conversation: str, text: str) -> None:
        """Post ``text``."""
        await self._post(json=self._payload(conversation, text))

    async def send_media(self, conversation: str, path: Path, media_type: str, caption: str) -> None:
        """Post the file as multipart form data, with the caption as the message."""
        files = {"files[0]" if self.settings.style == "discord" else "file": (path.name, path.read_bytes(), media_type)}
        data = {"payload_json": json.dumps(self._payload(conversation, caption))}
        await self._post(files=files, data=data)

    async def _post(self, **kwargs: Any) -> None:
        url = self._url()
        try:
            async with httpx.AsyncClient(timeout=TIMEOUT_S, follow_redirects=False) as client:
                response = await client.post(url, **kwargs)
        except httpx.HTTPError as exc:
            raise ChannelUnavailable(f"webhook {self.name!r} not reachable: {type(exc).__name__}") from None
        if response.status_code >= 300:
            raise ChannelUnavailable(f"webhook {self.name!r} answered HTTP {response.status_code}")
