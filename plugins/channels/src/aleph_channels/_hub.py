"""The hub: every configured adapter, and what happens to each message that arrives.

An inbound message goes one of three ways, and no other:

1. its sender is not paired (on an adapter with ``paired_only``, the default): the sender gets a one-time
   pairing code (once per code, so a flood is not answered with a flood) and the message is dropped;
   it never reaches an agent;
2. a question asked with ``ask_user`` is waiting in its conversation, and its sender is paired with the
   agent that asked: the message is the answer;
3. otherwise it waits in the owner's inbox (bounded) for the host, which reads it with
   :meth:`ChannelHub.receive` and starts a turn for that agent on that channel.

Adapters are started lazily, on first use, or all at once by the background service that
``aleph serve`` starts.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from aleph_channels._adapter import ChannelAdapter, ChannelUnavailable, Inbound
from aleph_channels._pairing import PairingStore

__all__ = ["ChannelHub", "Owned", "QuestionBusy"]

log = logging.getLogger("aleph.channels")

MAX_INBOX = 1000
"""Messages kept per owner for the host; beyond it the oldest are dropped (and counted)."""


class QuestionBusy(Exception):
    """A question already waits for an answer in that conversation."""


@dataclass(frozen=True, slots=True)
class Owned:
    """An inbound message from a paired sender, with the agent it belongs to."""

    owner: str
    message: Inbound


@dataclass(slots=True)
class _Question:
    owner: str
    future: asyncio.Future[Inbound]


class ChannelHub:
    """All adapters of a runtime, their pairing gate, open questions and inboxes."""

    def __init__(self, adapters: dict[str, ChannelAdapter], pairing: PairingStore, *, paired_only: dict[str, bool]):
        self.adapters = adapters
        self.pairing = pairing
        self._paired_only = paired_only
        self._started: dict[str, asyncio.Task[None] | None] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._questions: dict[tuple[str, str], _Question] = {}
        self._inbox: dict[str, deque[Inbound]] = {}
        self._inbox_event: dict[str, asyncio.Event] = {}
        self.dropped: dict[str, int] = {}
        """Inbox messages dropped per owner because the inbox was full."""
        self.refused = 0
        """Messages from unpaired senders that were dropped."""
        self.on_pairing_request: Callable[[str, str, str], None] | None = None
        """Called with (adapter, sender, expires-at text) when a fresh code is handed out (for the event log)."""

    def adapter(self, name: str) -> ChannelAdapter:
        """The adapter ``name``, or :class:`ChannelUnavailable` naming the configured ones."""
        adapter = self.adapters.get(name)
        if adapter is None:
            known = ", ".join(sorted(self.adapters)) or "none"
            raise ChannelUnavailable(
                f"no channel adapter named {name!r} (configured: {known}); add [channel_adapters.{name}] to aleph.toml"
            )
        return adapter

    async def ensure_started(self, name: str) -> ChannelAdapter:
        """Start adapter ``name`` if it is not running yet (once, even when called concurrently)."""
        adapter = self.adapter(name)
        if name in self._started:
            return adapter
        lock = self._locks.setdefault(name, asyncio.Lock())
        async with lock:
            if name not in self._started:
                await adapter.start(self._deliver)
                self._started[name] = None
        return adapter

    async def run(self) -> None:
        """Start every adapter that receives, then wait (the background service ``aleph serve`` runs)."""
        for name, adapter in self.adapters.items():
            if adapter.can_receive:
                try:
                    await self.ensure_started(name)
                except (ChannelUnavailable, OSError) as exc:
                    log.warning("channel adapter %s did not start: %s", name, exc)
        await asyncio.Event().wait()

    async def close(self) -> None:
        """Stop every started adapter and fail the questions still waiting."""
        for key, question in list(self._questions.items()):
            if not question.future.done():
                question.future.set_exception(ChannelUnavailable("the runtime is closing"))
            self._questions.pop(key, None)
        for name in list(self._started):
            try:
                await self.adapters[name].stop()
            except Exception:  # closing must go on for the others
                log.exception("channel adapter %s did not stop cleanly", name)
        self._started.clear()

    # --- inbound ---

    async def _deliver(self, message: Inbound) -> None:
        owner = self.pairing.owner_of(message.adapter, message.sender)
        if owner is None and self._paired_only.get(message.adapter, True):
            self.refused += 1
            pending = self.pairing.issue_code(message.adapter, message.sender)
            if pending.fresh:
                expires = time.strftime("%H:%M UTC", time.gmtime(pending.expires_at))
                text = (
                    f"This agent does not know you yet. Your pairing code is {pending.code} (valid until {expires}). "
                    "Ask its owner to approve it; until then your messages are not read."
                )
                try:
                    await self.adapters[message.adapter].send_text(message.conversation, text)
                except (ChannelUnavailable, OSError) as exc:
                    log.warning("could not send a pairing code on %s: %s", message.adapter, exc)
                if self.on_pairing_request is not None:
                    self.on_pairing_request(message.adapter, message.sender, expires)
            return
        owner = owner or ""
        question = self._questions.get((message.adapter, message.conversation))
        if question is not None and question.owner == owner and not question.future.done():
            question.future.set_result(message)
            return
        box = self._inbox.setdefault(owner, deque())
        if len(box) >= MAX_INBOX:
            box.popleft()
            self.dropped[owner] = self.dropped.get(owner, 0) + 1
        box.append(message)
        self._inbox_event.setdefault(owner, asyncio.Event()).set()

    async def receive(self, owner: str, timeout: float | None = None) -> Inbound | None:
        """The next message for agent ``owner`` from a paired sender, or None after ``timeout`` seconds."""
        box = self._inbox.setdefault(owner, deque())
        event = self._inbox_event.setdefault(owner, asyncio.Event())
        while not box:
            event.clear()
            try:
                await asyncio.wait_for(event.wait(), timeout)
            except TimeoutError:
                return None
        return box.popleft()

    # --- questions ---

    async def ask(self, name: str, conversation: str, owner: str, text: str, timeout: float) -> Inbound | None:
        """Send ``text`` to ``conversation`` and wait for its answer (None after ``timeout`` seconds).

        The answer is the next message in that conversation from a sender paired with ``owner``.
        """
        adapter = await self.ensure_started(name)
        if not adapter.can_receive:
            raise ChannelUnavailable(f"channel {name!r} ({adapter.kind}) can send but not receive, so it cannot ask")
        key = (name, conversation)
        if key in self._questions:
            raise QuestionBusy(f"a question already waits for an answer in {conversation!r} on {name!r}")
        future: asyncio.Future[Inbound] = asyncio.get_running_loop().create_future()
        self._questions[key] = _Question(owner, future)
        try:
            await adapter.send_text(conversation, text)
            return await asyncio.wait_for(future, timeout)
        except TimeoutError:
            return None
        finally:
            self._questions.pop(key, None)
