"""A question asked as text, one field at a time: on a channel adapter's conversation, or on the terminal.

Both are :class:`aleph.HumanChannel` implementations: a field is shown with how to answer it, a reply is
parsed into the field's type, and a reply that does not fit is asked again (three times at most).
Nobody answering before the question's timeout is a TIMEOUT answer, not an error.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from typing import Any

from aleph import ExecutionFailed, HumanAnswer, HumanField, HumanOutcome, HumanQuestion
from aleph_channels._adapter import ChannelUnavailable
from aleph_channels._hub import ChannelHub, QuestionBusy

__all__ = ["MAX_TRIES", "ChannelHuman", "TerminalHuman", "parse_answer"]

MAX_TRIES = 3


def _kind(f: HumanField) -> str:
    if f.kind == "boolean":
        return "yes_no"
    if f.kind in ("number", "integer"):
        return f.kind
    return "choice" if f.choices else "text"


def parse_answer(text: str, kind: str, choices: list[str] | tuple[str, ...]) -> tuple[Any, str | None]:
    """The typed value of an answer, or (None, why it does not fit)."""
    answer = text.strip()
    if not answer:
        return None, "the answer is empty"
    if kind in ("number", "integer"):
        try:
            value = int(answer) if answer.lstrip("+-").isdigit() else float(answer.replace(",", ""))
        except ValueError:
            return None, "please answer with a number"
        if kind == "integer" and not float(value).is_integer():
            return None, "please answer with a whole number"
        return (int(value) if kind == "integer" else value), None
    if kind == "yes_no":
        word = answer.lower()
        if word in ("y", "yes", "true", "ok", "sure"):
            return True, None
        if word in ("n", "no", "false", "nope"):
            return False, None
        return None, "please answer yes or no"
    if kind == "choice":
        if answer.isdigit() and 1 <= int(answer) <= len(choices):
            return choices[int(answer) - 1], None
        match = [c for c in choices if c.casefold() == answer.casefold()]
        if match:
            return match[0], None
        return None, "please answer with one of the options (or its number)"
    return answer, None


def _prompt(label: str, kind: str, choices: tuple[str, ...]) -> str:
    if kind == "choice":
        options = "\n".join(f"  {i}. {c}" for i, c in enumerate(choices, 1))
        return f"{label}\n{options}\n(answer with the option or its number)"
    if kind == "yes_no":
        return f"{label} (yes/no)"
    return label


class _TextHuman:
    """Asks a question field by field over some text exchange (``_exchange``)."""

    via = ""

    async def _exchange(self, text: str, left: float) -> tuple[str, str] | None:
        """Show ``text``; the reply and who sent it, or None when nobody answered within ``left`` seconds."""
        raise NotImplementedError

    async def ask(self, question: HumanQuestion) -> HumanAnswer:
        """Ask each field in turn; TIMEOUT when the question's time runs out."""
        deadline = time.monotonic() + question.timeout_s
        single = len(question.fields) == 1 and question.fields[0].name == "answer"
        intro = None if single else question.message
        values: dict[str, Any] = {}
        by = ""
        for f in question.fields:
            kind = _kind(f)
            label = question.message if single else (f.title or f.name)
            text = _prompt(label, kind, f.choices)
            if intro is not None:
                text, intro = f"{intro}\n{text}", None
            for _ in range(MAX_TRIES):
                left = deadline - time.monotonic()
                reply = await self._exchange(text, left) if left > 0 else None
                if reply is None:
                    return HumanAnswer(HumanOutcome.TIMEOUT, via=self.via)
                by = reply[1]
                value, why = parse_answer(reply[0], kind, f.choices)
                if why is None:
                    values[f.name] = value
                    break
                text = f"{why}. {_prompt(label, kind, f.choices)}"
            else:
                raise ExecutionFailed("ask_user", f"no valid answer for {f.name!r} after {MAX_TRIES} tries")
        return HumanAnswer(HumanOutcome.ACCEPTED, values, self.via, by)


class ChannelHuman(_TextHuman):
    """The conversation a request came from, on one of this family's channel adapters."""

    def __init__(self, hub: ChannelHub, channel: str, conversation: str, owner: str) -> None:
        self._hub = hub
        self.via = channel
        self._conversation = conversation
        self._owner = owner

    async def _exchange(self, text: str, left: float) -> tuple[str, str] | None:
        try:
            reply = await self._hub.ask(self.via, self._conversation, self._owner, text, left)
        except QuestionBusy as exc:
            raise ExecutionFailed("ask_user", f"{exc}; wait for it first") from None
        except ChannelUnavailable as exc:
            raise ExecutionFailed("ask_user", str(exc)) from None
        return None if reply is None else (reply.text, reply.sender)


class TerminalHuman(_TextHuman):
    """The terminal the command runs in (standard input is a TTY)."""

    via = "terminal"

    async def _exchange(self, text: str, left: float) -> tuple[str, str] | None:
        sys.stderr.write(f"\nThe agent asks: {text}\n> ")
        sys.stderr.flush()
        try:
            line = await asyncio.wait_for(_read_terminal_line(), left)
        except TimeoutError:
            return None
        return None if line is None else (line, "terminal user")


async def _read_terminal_line() -> str | None:
    """One line typed at the terminal, read on the event loop so that cancelling the call stops the wait."""
    fd = sys.stdin.fileno()
    loop = asyncio.get_running_loop()
    ready = loop.create_future()
    loop.add_reader(fd, lambda: ready.done() or ready.set_result(None))
    try:
        await ready
    finally:
        loop.remove_reader(fd)
    data = os.read(fd, 4096)
    return data.decode(errors="replace") if data else None
