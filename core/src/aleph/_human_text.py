"""A question asked as text, one field at a time: the base of chat adapters' human channels, and the terminal.

:class:`TextHumanChannel` shows each field with how to answer it, parses the reply into the field's type
(a number, yes/no, one of the choices by text or number) and asks again when a reply does not fit
(three times at most). A subclass supplies one exchange: show a text, return the reply and who sent it,
or None when nobody answered in time. Nobody answering before the question's timeout is a TIMEOUT answer.

:class:`TerminalHuman` is the terminal the command runs in; ``aleph tools call`` binds it on a TTY.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any, TextIO

import anyio

from aleph._chokepoint._requesters import MAX_LINE, _readable_or_interrupted, _sigint_owned
from aleph._human import HumanAnswer, HumanAnswerInvalid, HumanField, HumanOutcome, HumanQuestion, HumanUnavailable

__all__ = ["MAX_TRIES", "TerminalHuman", "TextHumanChannel", "parse_text_answer"]

MAX_TRIES = 3
"""Replies one field may get before the question fails."""


def field_kind(f: HumanField) -> str:
    """How a field is answered in text: ``text``, ``number``, ``integer``, ``yes_no`` or ``choice``."""
    if f.kind == "boolean":
        return "yes_no"
    if f.kind in ("number", "integer"):
        return f.kind
    return "choice" if f.choices else "text"


def parse_text_answer(text: str, kind: str, choices: tuple[str, ...] | list[str] = ()) -> tuple[Any, str | None]:
    """The typed value of a text reply, or (None, why it does not fit) — the why is shown to the person."""
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


class TextHumanChannel:
    """A :class:`~aleph.HumanChannel` over a text exchange, asking one field at a time."""

    via = "text"
    """Where the person answers (a channel's name): reported as the answer's ``via``."""

    async def exchange(self, text: str, seconds_left: float) -> tuple[str, str] | None:
        """Show ``text``; return (the reply, who sent it), or None when nobody answered in ``seconds_left``."""
        raise NotImplementedError

    async def ask(self, question: HumanQuestion) -> HumanAnswer:
        """Ask each field in turn; TIMEOUT when the question's time runs out."""
        deadline = time.monotonic() + question.timeout_s
        single = len(question.fields) == 1 and question.fields[0].name == "answer"
        intro = None if single else question.message
        values: dict[str, Any] = {}
        by = ""
        for f in question.fields:
            kind = field_kind(f)
            label = question.message if single else (f.title or f.name)
            if not f.required:
                label += " (optional: answer - to skip)"
            text = _prompt(label, kind, f.choices)
            if intro is not None:
                text, intro = f"{intro}\n{text}", None
            for _ in range(MAX_TRIES):
                left = deadline - time.monotonic()
                reply = await self.exchange(text, left) if left > 0 else None
                if reply is None:
                    return HumanAnswer(HumanOutcome.TIMEOUT, via=self.via)
                by = reply[1]
                if not f.required and reply[0].strip() == "-":
                    break
                value, why = parse_text_answer(reply[0], kind, f.choices)
                if why is None:
                    values[f.name] = value
                    break
                text = f"{why}. {_prompt(label, kind, f.choices)}"
            else:
                raise HumanAnswerInvalid(f"no valid answer for field {f.name!r} after {MAX_TRIES} tries")
        return HumanAnswer(HumanOutcome.ACCEPTED, values, self.via, by)


class TerminalHuman(TextHumanChannel):
    """The terminal the command runs in. Reading is cancellable, and Ctrl-C ends the wait at once."""

    via = "terminal"

    def __init__(self, stdin: TextIO | None = None, stderr: TextIO | None = None) -> None:
        self._in = stdin or sys.stdin
        self._out = stderr or sys.stderr

    async def exchange(self, text: str, seconds_left: float) -> tuple[str, str] | None:
        """Show the question on the terminal and read one line (None at the timeout or end of input)."""
        if not self._in.isatty():
            raise HumanUnavailable("", "standard input is not a terminal, so nobody can be asked")
        with _sigint_owned() as interrupted:  # from before the question shows (see TerminalRequester)
            self._out.write(f"\nThe agent asks: {text}\n> ")
            self._out.flush()
            with anyio.move_on_after(seconds_left):
                fd = self._in.fileno()
                while True:
                    await _readable_or_interrupted(fd, interrupted)
                    try:
                        data = os.read(fd, MAX_LINE)
                    except BlockingIOError:
                        continue
                    return (data.decode(errors="replace"), "terminal user") if data else None
        return None
