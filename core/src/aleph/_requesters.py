"""Ready-made approval requesters: a terminal prompt for the CLI and a scripted one for programs and tests."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from typing import TextIO

import anyio.to_thread

from aleph._approval import ApprovalDecision, ApprovalOutcome, ApprovalRequest, ApprovalResponse

__all__ = ["ScriptedRequester", "TerminalRequester"]


class ScriptedRequester:
    """Answers from a script: a sequence of outcomes (or responses), or a function of the request.

    Every request is kept in :attr:`requests`, so a program or a test can see exactly what a human
    would have been shown. When the script runs out, it answers UNAVAILABLE (never "allow").
    """

    def __init__(
        self,
        answers: Iterable[ApprovalOutcome | ApprovalResponse] | Callable[[ApprovalRequest], ApprovalResponse] = (),
    ) -> None:
        self._fn = answers if callable(answers) else None
        self._queue = [] if callable(answers) else list(answers)
        self.requests: list[ApprovalRequest] = []

    async def request_approval(self, request: ApprovalRequest) -> ApprovalResponse:
        """Record the request and return the next scripted answer."""
        self.requests.append(request)
        if self._fn is not None:
            return self._fn(request)
        if not self._queue:
            return ApprovalResponse(ApprovalOutcome.UNAVAILABLE, "the scripted requester has no answer left")
        answer = self._queue.pop(0)
        return answer if isinstance(answer, ApprovalResponse) else ApprovalResponse(answer)


_KEYS = {
    ApprovalDecision.ALLOW_ONCE: ("y", "yes, once", ApprovalOutcome.APPROVED),
    ApprovalDecision.ALLOW_SESSION: ("s", "yes, for this session", ApprovalOutcome.APPROVED_FOR_SESSION),
    ApprovalDecision.ALLOW_ALWAYS: ("a", "yes, always", ApprovalOutcome.APPROVED_ALWAYS),
    ApprovalDecision.DENY: ("n", "no", ApprovalOutcome.DENIED),
}


class TerminalRequester:
    """Asks on the controlling terminal: y (once) / s (session) / a (always, when offered) / n.

    When stdin is not a TTY nobody can be asked: it answers UNAVAILABLE without reading anything.
    """

    def __init__(self, stdin: TextIO | None = None, stderr: TextIO | None = None) -> None:
        self._in = stdin or sys.stdin
        self._out = stderr or sys.stderr

    async def request_approval(self, request: ApprovalRequest) -> ApprovalResponse:
        """Show the request and read the answer in a worker thread."""
        if not self._in.isatty():
            return ApprovalResponse(ApprovalOutcome.UNAVAILABLE, "stdin is not a terminal, so nobody can be asked")
        return await anyio.to_thread.run_sync(self._ask, request)

    def _ask(self, request: ApprovalRequest) -> ApprovalResponse:
        choices = [_KEYS[d] for d in request.allowed_decisions]
        menu = " / ".join(f"[{key}] {label}" for key, label, _ in choices)
        self._out.write(f"\nApproval needed: {request.summary}\n  why: {request.reason}\n  {menu}: ")
        self._out.flush()
        answer = self._in.readline()
        if not answer:
            return ApprovalResponse(ApprovalOutcome.UNAVAILABLE, "the terminal closed")
        key = answer.strip().lower()[:1]
        for k, _label, outcome in choices:
            if key == k:
                return ApprovalResponse(outcome)
        reason = answer.strip()
        return ApprovalResponse(
            ApprovalOutcome.DENIED, reason if reason and reason.lower() not in ("n", "no") else None
        )
