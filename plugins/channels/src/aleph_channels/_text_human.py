"""A question asked on the conversation a request came from, one field at a time (core's text channel).

:class:`ChannelHuman` is an :class:`aleph.TextHumanChannel` whose exchange is one message to the
conversation on this family's adapter and the first reply from a sender paired with the asking agent.
"""

from __future__ import annotations

from aleph import ExecutionFailed, TextHumanChannel
from aleph_channels._adapter import ChannelUnavailable
from aleph_channels._hub import ChannelHub, QuestionBusy

__all__ = ["ChannelHuman"]


class ChannelHuman(TextHumanChannel):
    """The conversation a request came from, on one of this family's channel adapters."""

    def __init__(self, hub: ChannelHub, channel: str, conversation: str, owner: str) -> None:
        self._hub = hub
        self.via = channel
        self._conversation = conversation
        self._owner = owner

    async def exchange(self, text: str, seconds_left: float) -> tuple[str, str] | None:
        """Send ``text`` to the conversation; the paired sender's reply, or None at the timeout."""
        try:
            reply = await self._hub.ask(self.via, self._conversation, self._owner, text, seconds_left)
        except QuestionBusy as exc:
            raise ExecutionFailed("ask_user", f"{exc}; wait for it first") from None
        except ChannelUnavailable as exc:
            raise ExecutionFailed("ask_user", str(exc)) from None
        return None if reply is None else (reply.text, reply.sender)
