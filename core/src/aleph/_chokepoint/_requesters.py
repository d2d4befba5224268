"""Ready-made approval requesters: a terminal prompt for the CLI and a scripted one for programs and tests."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TextIO

import anyio

from aleph._chokepoint._approval import ApprovalDecision, ApprovalOutcome, ApprovalRequest, ApprovalResponse
from aleph._errors import ApprovalRequired

__all__ = ["DeferredApprovals", "ScriptedRequester", "TerminalRequester"]


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
_WORDS = {"yes": "y", "no": "n", "session": "s", "always": "a"}
MAX_TRIES = 10
"""Invalid answers asked again before giving up (the answer is then UNAVAILABLE, never "allow")."""
MAX_LINE = 4096
"""Longest answer line read."""


class TerminalRequester:
    """Asks on the controlling terminal: y (once) / s (session) / a (always, when offered) / n.

    The answer is read on the event loop (not in a worker thread), so Ctrl-C cancels the waiting call at
    once. An answer that is not one of the offered keys asks again; after "n" an optional reason is
    asked. When stdin is not a TTY nobody can be asked: it answers UNAVAILABLE without reading anything.
    """

    def __init__(self, stdin: TextIO | None = None, stderr: TextIO | None = None) -> None:
        self._in = stdin or sys.stdin
        self._out = stderr or sys.stderr
        self.last_denial_reason: str | None = None
        """The reason given with the latest "no", for a caller that reports the refusal to the person."""

    async def request_approval(self, request: ApprovalRequest) -> ApprovalResponse:
        """Show the request and read the answer, asking again after an invalid one."""
        if not self._in.isatty():
            return ApprovalResponse(ApprovalOutcome.UNAVAILABLE, "stdin is not a terminal, so nobody can be asked")
        # Ctrl-C is the prompt's from before its first line is written: one typed the instant the prompt
        # appears ends the wait too (it used to reach the program's own handler and could be absorbed).
        with _sigint_owned() as interrupted:
            return await self._ask(request, interrupted)

    async def _ask(self, request: ApprovalRequest, interrupted: asyncio.Future[None] | None) -> ApprovalResponse:
        choices = [_KEYS[d] for d in request.allowed_decisions if d in _KEYS]
        menu = " / ".join(f"[{key}] {label}" for key, label, _ in choices)
        self._write(f"\nApproval needed: {request.summary}\n  why: {request.reason}\n")
        for _ in range(MAX_TRIES):
            self._write(f"  {menu}: ")
            answer = await self._readline(interrupted)
            if answer is None:
                return ApprovalResponse(ApprovalOutcome.UNAVAILABLE, "the terminal closed")
            word = answer.strip().lower()
            key = _WORDS.get(word, word)
            outcome = next((o for k, _label, o in choices if k == key), None)
            if outcome is None:
                keys = ", ".join(k for k, _label, _o in choices)
                self._write(f"  please answer one of: {keys}\n")
                continue
            if outcome is not ApprovalOutcome.DENIED:
                return ApprovalResponse(outcome)
            self._write("  why not? (optional, Enter to skip): ")
            reason = await self._readline(interrupted)
            self.last_denial_reason = (reason or "").strip()[:500] or None
            return ApprovalResponse(outcome, self.last_denial_reason)
        return ApprovalResponse(ApprovalOutcome.UNAVAILABLE, f"no valid answer after {MAX_TRIES} tries")

    def _write(self, text: str) -> None:
        self._out.write(text)
        self._out.flush()

    async def _readline(self, interrupted: asyncio.Future[None] | None = None) -> str | None:
        """One line from the terminal, or None at end of input; Ctrl-C (``interrupted``) ends the wait."""
        try:
            fd = self._in.fileno()
        except (OSError, ValueError):  # a stream without a descriptor (a test double) answers at once
            line = self._in.readline()
            return line or None
        while True:
            # A terminal in canonical mode is readable once a whole line was typed (or at Ctrl-D).
            await _readable_or_interrupted(fd, interrupted)
            try:
                data = os.read(fd, MAX_LINE)
            except BlockingIOError:
                continue
            return data.decode(errors="replace") if data else None


@contextlib.contextmanager
def _sigint_owned() -> Iterator[asyncio.Future[None] | None]:
    """While a person is being asked, SIGINT settles the future this yields (None where it cannot be had).

    The event loop's own signal handling wakes the loop through its wakeup descriptor whatever the main
    thread is doing, and the interrupt ends the wait directly. Left to the default path, a SIGINT had to
    travel as a cancellation of the program's main task through the approval timeout's task and the
    caller's task group, and could be absorbed on the way; the call then waited for an answer forever.
    """
    loop = asyncio.get_running_loop()
    interrupted = loop.create_future()
    previous = signal.getsignal(signal.SIGINT)
    try:
        loop.add_signal_handler(signal.SIGINT, _settle, interrupted)
    except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, or no unix signals
        yield None
        return
    try:
        yield interrupted
    finally:
        loop.remove_signal_handler(signal.SIGINT)
        signal.signal(signal.SIGINT, previous)  # the program's own handler again (asyncio.run's, or Python's)


async def _readable_or_interrupted(fd: int, interrupted: asyncio.Future[None] | None) -> None:
    """Wait until ``fd`` is readable; raise KeyboardInterrupt once ``interrupted`` is settled (Ctrl-C)."""
    if interrupted is None:
        await anyio.wait_readable(fd)
        return
    if not interrupted.done():
        loop = asyncio.get_running_loop()
        readable = loop.create_future()
        loop.add_reader(fd, _settle, readable)
        try:
            await asyncio.wait((readable, interrupted), return_when=asyncio.FIRST_COMPLETED)
        finally:
            loop.remove_reader(fd)
    if interrupted.done():
        raise KeyboardInterrupt


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class DeferredApprovals:
    """A requester that never blocks: it answers from decisions already made, or suspends the call.

    A call that needs approval and whose fingerprint (tool + canonical arguments) has no answer here
    raises :class:`~aleph.ApprovalRequired` out of ``execute``, carrying the request to show. Resume by
    answering that fingerprint and making the same call again; an answer never covers another call.
    This is how a framework's own suspend/resume flow (or a stateless MCP round trip) carries "ask".
    """

    def __init__(self, answers: Mapping[str, ApprovalResponse] | None = None) -> None:
        self._answers: dict[str, ApprovalResponse] = {}
        for fingerprint, response in (answers or {}).items():
            self.answer(fingerprint, response)

    def answer(self, fingerprint: str, response: ApprovalResponse) -> DeferredApprovals:
        """Hold ``response`` for the call whose request carried ``fingerprint``; returns self."""
        if not isinstance(response, ApprovalResponse):
            raise TypeError(f"an answer must be an ApprovalResponse, got {type(response).__name__}")
        self._answers[fingerprint] = response
        return self

    def pending(self, fingerprint: str) -> bool:
        """Whether no answer is held for ``fingerprint``."""
        return fingerprint not in self._answers

    async def request_approval(self, request: ApprovalRequest) -> ApprovalResponse:
        """The held answer for this exact call (used once), else raise ``ApprovalRequired``."""
        response = self._answers.pop(request.fingerprint, None)
        if response is None:
            raise ApprovalRequired(request.tool_name, request)
        return response
