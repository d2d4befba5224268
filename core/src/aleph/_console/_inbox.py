"""The console's approval inbox: an :class:`~aleph.ApprovalRequester` that holds each ask until the page answers.

Every service built with the inbox as its requester queues its asks here, across agents and sessions; the
answer from the page is returned to the waiting call exactly as a terminal's or an MCP client's answer is,
so the gate applies it the same way (once, for the session, always, or a refusal).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from dataclasses import dataclass, field

from aleph._chokepoint._approval import ApprovalDecision, ApprovalOutcome, ApprovalRequest, ApprovalResponse
from aleph._chokepoint._askstore import ANSWERS

__all__ = ["ConsoleInbox", "PendingAsk"]

MAX_PENDING = 1000
"""Asks held at once; beyond it a new ask is answered UNAVAILABLE at once (nobody can read a longer inbox)."""


@dataclass(eq=False)
class PendingAsk:
    """One call waiting for a human."""

    id: str
    request: ApprovalRequest
    asked_at: float
    answer: asyncio.Future[ApprovalResponse] = field(repr=False)


class ConsoleInbox:
    """An approval requester whose asks wait for an answer from the console page (or time out)."""

    is_console = True
    """Its asks are on a console page already: the runtime does not offer them to the shared inbox too."""

    def __init__(self, *, timeout_s: float = 300.0) -> None:
        """:param timeout_s: how long an ask waits before it is answered TIMEOUT (nobody answered)."""
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be a positive number of seconds, got {timeout_s!r}")
        self.timeout_s = timeout_s
        self._pending: dict[str, PendingAsk] = {}
        self._ids = itertools.count(1)
        self.changed = asyncio.Event()
        """Set whenever an ask arrives or leaves (the page's long poll waits on it)."""

    def pending(self) -> list[PendingAsk]:
        """The asks waiting now, oldest first."""
        return list(self._pending.values())

    async def request_approval(self, request: ApprovalRequest) -> ApprovalResponse:
        """Hold ``request`` in the inbox until the page answers it or ``timeout_s`` passes."""
        if len(self._pending) >= MAX_PENDING:
            return ApprovalResponse(ApprovalOutcome.UNAVAILABLE, "the console's inbox is full")
        ask = PendingAsk(str(next(self._ids)), request, time.time(), asyncio.get_running_loop().create_future())
        self._pending[ask.id] = ask
        self._touch()
        try:
            return await asyncio.wait_for(asyncio.shield(ask.answer), self.timeout_s)
        except TimeoutError:
            return ApprovalResponse(ApprovalOutcome.TIMEOUT)
        finally:
            self._pending.pop(ask.id, None)
            self._touch()

    def answer(self, ask_id: str, decision: str, reason: str | None = None) -> str | None:
        """Answer the ask ``ask_id`` with ``decision``; returns why not when it cannot be answered."""
        ask = self._pending.get(ask_id)
        if ask is None or ask.answer.done():
            return "that ask is no longer waiting (answered elsewhere, timed out, or never asked)"
        try:
            choice = ApprovalDecision(decision)
        except ValueError:
            return f"unknown answer {decision!r}"
        if choice not in ask.request.allowed_decisions:
            return f"{choice.value} is not offered for this ask"
        outcome = ANSWERS[choice]
        del self._pending[ask_id]  # gone from the page at once, before the waiting call resumes
        self._touch()
        ask.answer.set_result(ApprovalResponse(outcome, (reason or None) if choice is ApprovalDecision.DENY else None))
        return None

    def _touch(self) -> None:
        self.changed.set()
        self.changed = asyncio.Event()
