"""Offering asks to the data directory's approval inbox, alongside the terminal or the MCP client.

``[console] inbox`` decides when a runtime (and ``aleph serve``) offers its asks to the inbox that
``aleph console`` reads (see :mod:`aleph._chokepoint._askstore`):

- ``"auto"`` (the default): while a console is running on this data directory (it holds the inbox's
  presence lock), at the moment the call asks;
- ``true``: always, so a console started later still sees the ask (until the approval timeout);
- ``false``: never.

The inbox is asked *alongside* the requester the host chose (a terminal prompt, a plugin's chat card):
:class:`FirstAnswer` asks both at once, the first real answer wins and the other ask is withdrawn (its
card leaves the console; the terminal prompt is cancelled). A requester that cannot ask ("stdin is not
a terminal") does not end the wait while the inbox can still be answered. A deferring requester
(:class:`~aleph.DeferredApprovals`) is left alone: whoever resumes the call decides where to ask, as
``aleph serve`` does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, field_validator

from aleph._chokepoint._approval import ApprovalOutcome, ApprovalRequest, ApprovalRequester, ApprovalResponse
from aleph._chokepoint._askstore import AskStore, InboxClosed, console_running, inbox_directory
from aleph._chokepoint._requesters import DeferredApprovals
from aleph._console._preview import preview_for
from aleph._errors import ApprovalRequired

if TYPE_CHECKING:
    from aleph._config import AlephConfig
    from aleph._principal import Principal

__all__ = ["ConsoleSettings", "FirstAnswer", "InboxRequester", "SharedInbox"]

log = logging.getLogger("aleph.console")

PRESENCE_TTL_S = 1.0
"""How long one look at the console's presence lock is trusted (a service is built per request)."""


class ConsoleSettings(BaseModel):
    """``[console]``: when asks go to the inbox ``aleph console`` reads."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    inbox: Literal["auto", "on", "off"] = "auto"
    """``auto``: while a console runs on this data directory; ``true``/``on``: always; ``false``/``off``: never."""

    @field_validator("inbox", mode="before")
    @classmethod
    def _booleans(cls, value: Any) -> Any:
        return {True: "on", False: "off"}.get(value, value) if isinstance(value, bool) else value


def _process_name() -> str:
    """``aleph serve``, ``python agent.py``: which program asks (shown on the card)."""
    argv = [a for a in sys.argv[:2] if a]
    words = [Path(argv[0]).name] if argv else ["python"]
    if len(argv) > 1 and not argv[1].startswith("-"):
        words.append(Path(argv[1]).name)
    return " ".join(words)[:200]


def _who(principal: Principal | None, request: ApprovalRequest) -> dict[str, Any]:
    turn = request.turn
    if principal is None:
        return {
            "principal": turn.principal if turn else None,
            "channel": turn.channel_id if turn else None,
            "session": turn.session_key if turn else None,
        }
    return {
        "agent": principal.agent,
        "role": principal.role,
        "channel": principal.channel,
        "session": principal.session,
        "user": principal.user,
        "chain": [p.agent for p in principal.chain],
    }


class SharedInbox:
    """One runtime's door to its data directory's approval inbox (opened on the first ask)."""

    def __init__(self, config: AlephConfig, current: Callable[[], AlephConfig] | None = None) -> None:
        """:param current: the configuration in force now (permission diffs are read against it)."""
        self.mode = config.section("console", ConsoleSettings).inbox
        self.directory = inbox_directory(config.data_dir)
        self.timeout = config.approval.timeout
        self._current = current or (lambda: config)
        self._store: AskStore | None = None
        self._presence = (0.0, False)

    def store(self) -> AskStore:
        """The inbox file, opened once."""
        if self._store is None:
            self._store = AskStore(self.directory)
        return self._store

    def offered(self) -> bool:
        """Whether an ask made now goes to the inbox (see the module docstring)."""
        if self.mode != "auto":
            return self.mode == "on"
        checked, up = self._presence
        now = time.monotonic()
        if now - checked > PRESENCE_TTL_S:
            up = console_running(self.directory)
            self._presence = (now, up)
        return up

    def alongside(self, requester: ApprovalRequester | None, principal: Principal | None) -> ApprovalRequester | None:
        """``requester`` with the inbox asked beside it (or the inbox alone, or ``requester`` as it is)."""
        if self.mode == "off" or isinstance(requester, DeferredApprovals) or getattr(requester, "is_console", False):
            return requester  # a console's own in-process inbox already shows the ask on its page
        if not self.offered():  # "auto" with no console up: a service lives for one request, the next looks again
            return requester
        inbox = InboxRequester(self, principal)
        return inbox if requester is None else FirstAnswer((requester, inbox))

    async def ask(self, request: ApprovalRequest, principal: Principal | None = None) -> ApprovalResponse:
        """Offer ``request`` in the inbox and wait for its answer (UNAVAILABLE at once when it is not offered)."""
        if not self.offered():
            return ApprovalResponse(ApprovalOutcome.UNAVAILABLE, "no console is running on this data directory")
        payload = {
            "tool": request.tool_name,
            "summary": request.summary,
            "reason": request.reason,
            "rule_id": request.rule_id,
            "allowed": [d.value for d in request.allowed_decisions],
            "arguments": request.arguments,
            "who": _who(principal, request),
            "preview": _preview(request, self._current),
        }
        store = self.store()
        ask_id = await asyncio.to_thread(
            store.offer,
            payload,
            tool=request.tool_name,
            expires_at=time.time() + self.timeout,
            process=_process_name(),
        )
        if ask_id is None:
            return ApprovalResponse(ApprovalOutcome.UNAVAILABLE, "the console's inbox is full")
        settled = None
        try:
            settled = await store.wait(ask_id)
        except InboxClosed as exc:
            return ApprovalResponse(ApprovalOutcome.UNAVAILABLE, str(exc))
        finally:
            if settled is None:  # cancelled: another requester answered, or the call ended
                with contextlib.suppress(Exception):
                    store.withdraw(ask_id)
        response = settled.response()
        return response or ApprovalResponse(ApprovalOutcome.UNAVAILABLE, "the ask left the inbox unanswered")

    def close(self) -> None:
        """Close the inbox file if it was opened."""
        if self._store is not None:
            self._store.close()
            self._store = None


def _preview(request: ApprovalRequest, current: Callable[[], AlephConfig]) -> dict[str, Any] | None:
    try:
        return preview_for(request.tool_name, request.arguments, current())
    except Exception:  # a card without its preview still shows the arguments
        log.exception("the preview of an ask could not be made")
        return None


class InboxRequester:
    """Asks through the data directory's inbox (``aleph console`` answers), as one principal."""

    def __init__(self, inbox: SharedInbox, principal: Principal | None = None) -> None:
        self.inbox = inbox
        self.principal = principal

    async def request_approval(self, request: ApprovalRequest) -> ApprovalResponse:
        """Offer the ask in the inbox and return the console's answer."""
        return await self.inbox.ask(request, self.principal)


_NO_ANSWER = (ApprovalOutcome.UNAVAILABLE, ApprovalOutcome.TIMEOUT)


class FirstAnswer:
    """Asks several requesters at once; the first real answer wins and the other asks are withdrawn.

    An UNAVAILABLE or TIMEOUT from one is not an answer while another may still give one; when none
    answered, a TIMEOUT is preferred over UNAVAILABLE (someone could have answered). A requester that
    raises :class:`~aleph.ApprovalRequired` (it defers the call) ends the wait at once.
    """

    def __init__(self, requesters: Sequence[ApprovalRequester]) -> None:
        if not requesters:
            raise ValueError("FirstAnswer needs at least one requester")
        self.requesters = tuple(requesters)

    async def request_approval(self, request: ApprovalRequest) -> ApprovalResponse:
        """The first answer of any requester that is not "nobody could be asked" or "nobody answered"."""
        tasks = [asyncio.ensure_future(r.request_approval(request)) for r in self.requesters]
        fallback: ApprovalResponse | None = None
        try:
            pending = set(tasks)
            while pending:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for task in (t for t in tasks if t in done):  # in the requesters' order when several finished
                    if task.cancelled():
                        continue
                    problem = task.exception()
                    if isinstance(problem, ApprovalRequired):
                        raise problem
                    if problem is not None:
                        log.error("approval requester failed: %r", problem)
                        why = f"the approval channel failed: {problem}"
                        response = ApprovalResponse(ApprovalOutcome.UNAVAILABLE, why)
                    else:
                        response = task.result()
                    if getattr(response, "outcome", None) not in _NO_ANSWER:
                        return response
                    if fallback is None or response.outcome is ApprovalOutcome.TIMEOUT:
                        fallback = response
            return fallback or ApprovalResponse(ApprovalOutcome.UNAVAILABLE, "no requester gave an answer")
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
