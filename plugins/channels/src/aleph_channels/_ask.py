"""``ask_user``: a question to the human the agent works for, on the channel the request came from.

Where the question goes is decided by who is calling, never by an argument: the request's channel (an
adapter of this family) and conversation, both bound by the host; else the terminal the command runs in.
The tool is never tier-gated (core treats it as human contact), so it takes no target: an agent cannot use
it to message anyone else. An unattended run has nobody to ask and is told so.

A form is asked one field at a time on a text channel, each answer checked and asked again (three times at
most) when it does not fit. Answers are untrusted content: the result says so.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from typing import Any, Literal

from pydantic import Field, model_validator

import aleph
from aleph import AlephTool, ExecutionFailed, ToolArgs, ToolFacts
from aleph_channels._adapter import ChannelUnavailable
from aleph_channels._hub import ChannelHub, QuestionBusy
from aleph_channels._tools import owner_of_call

__all__ = ["AskUser", "FormField", "parse_answer"]

MAX_TRIES = 3


class FormField(ToolArgs):
    name: str = Field(pattern=r"^[a-z][a-z0-9_]{0,39}$")
    """The key of this field in the answer (lowercase, digits, underscores)."""
    label: str = Field(min_length=1, max_length=300)
    """What the person is asked for this field."""
    kind: Literal["text", "number", "yes_no", "choice"] = "text"
    """What a valid answer is."""
    choices: list[str] = Field(default_factory=list, max_length=20)
    """For ``choice``: the options (the person may answer with the option or its number)."""


class AskArgs(ToolArgs):
    question: str = Field(min_length=1, max_length=2000)
    """The question, in the words the person should read."""
    choices: list[str] = Field(default_factory=list, max_length=20)
    """Options to pick from (answer by text or number); empty for a free-text answer."""
    form: list[FormField] = Field(default_factory=list, max_length=10)
    """Fields to fill in, asked one at a time (instead of ``choices``)."""
    timeout_s: int = Field(default=300, ge=5, le=600)
    """Seconds to wait for the answer (at most 600)."""

    @model_validator(mode="after")
    def _one_shape(self) -> AskArgs:
        if self.choices and self.form:
            raise ValueError("give choices or a form, not both")
        for f in self.form:
            if f.kind == "choice" and not f.choices:
                raise ValueError(f"form field {f.name!r} is a choice but lists no choices")
        if len({f.name for f in self.form}) != len(self.form):
            raise ValueError("form field names must be distinct")
        if any(len(c) > 200 or not c.strip() for c in self.choices):
            raise ValueError("each choice must be 1 to 200 characters")
        return self


def parse_answer(text: str, kind: str, choices: list[str]) -> tuple[Any, str | None]:
    """The typed value of an answer, or (None, why it does not fit)."""
    answer = text.strip()
    if not answer:
        return None, "the answer is empty"
    if kind == "number":
        try:
            return (int(answer) if answer.lstrip("+-").isdigit() else float(answer.replace(",", ""))), None
        except ValueError:
            return None, "please answer with a number"
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


def _prompt(label: str, kind: str, choices: list[str]) -> str:
    if kind == "choice":
        options = "\n".join(f"  {i}. {c}" for i, c in enumerate(choices, 1))
        return f"{label}\n{options}\n(answer with the option or its number)"
    if kind == "yes_no":
        return f"{label} (yes/no)"
    return label


class AskUser(AlephTool[AskArgs]):
    NAME = "ask_user"
    DESCRIPTION = (
        "Ask the human you work for a question and wait for the answer: free text, one of some choices, or a "
        "short form. It goes to the conversation this request came from (or the terminal); it cannot message "
        "anyone else. Use it when you need a decision or a fact only the person has."
    )
    Args = AskArgs
    FACTS = ToolFacts(idempotent=False, concurrent_safe=True, max_duration_ms=630_000, tags=("human", "channels"))

    def __init__(self, hub: ChannelHub) -> None:
        self._hub = hub

    @property
    def hub(self) -> ChannelHub:
        """The channel hub this tool asks through (the host reads inboxes from it)."""
        return self._hub

    async def call(self, args: AskArgs) -> dict[str, Any]:
        call = aleph.current_call()
        turn = call.turn if call is not None else None
        if turn is not None and turn.unattended:
            raise ExecutionFailed(self.NAME, "nobody is watching this run (it is unattended): decide without asking")
        channel = call.channel if call is not None else None
        owner = owner_of_call()
        steps: list[tuple[str, str, str, list[str]]]
        if args.form:
            steps = [(f.name, f.label, f.kind, f.choices) for f in args.form]
        else:
            steps = [("answer", args.question, "choice" if args.choices else "text", args.choices)]
        deadline = time.monotonic() + args.timeout_s
        if channel and channel in self._hub.adapters:
            conversation = turn.conversation_id if turn is not None else ""
            if not conversation:
                raise ExecutionFailed(
                    self.NAME,
                    f"the request on channel {channel!r} names no conversation to ask in "
                    "(the host passes it as TurnContext(conversation_id=...))",
                )
            intro = args.question if args.form else None
            return await self._ask_channel(channel, conversation, owner, steps, deadline, intro)
        if sys.stdin is not None and sys.stdin.isatty():
            if args.form:
                sys.stderr.write(f"\nThe agent asks: {args.question}\n")
            return await self._ask_terminal(steps, deadline)
        raise ExecutionFailed(
            self.NAME,
            "no way to reach a person from here: this request came from no channel adapter and no terminal is "
            "attached; decide without asking, or configure [channel_adapters.<name>] for the channel the host uses",
        )

    async def _ask_channel(
        self,
        channel: str,
        conversation: str,
        owner: str,
        steps: list[tuple[str, str, str, list[str]]],
        deadline: float,
        intro: str | None,
    ) -> dict[str, Any]:
        values: dict[str, Any] = {}
        by = ""
        for name, label, kind, choices in steps:
            text = _prompt(label, kind, choices)
            if intro is not None:
                text, intro = f"{intro}\n{text}", None
            for _ in range(MAX_TRIES):
                left = deadline - time.monotonic()
                if left <= 0:
                    return _unanswered(channel, values)
                try:
                    reply = await self._hub.ask(channel, conversation, owner, text, left)
                except QuestionBusy as exc:
                    raise ExecutionFailed(self.NAME, f"{exc}; wait for it first") from None
                except ChannelUnavailable as exc:
                    raise ExecutionFailed(self.NAME, str(exc)) from None
                if reply is None:
                    return _unanswered(channel, values)
                by = reply.sender
                value, why = parse_answer(reply.text, kind, choices)
                if why is None:
                    values[name] = value
                    break
                text = f"{why}. {_prompt(label, kind, choices)}"
            else:
                raise ExecutionFailed(self.NAME, f"no valid answer for {name!r} after {MAX_TRIES} tries")
        return _answered(steps, values, channel, by)

    async def _ask_terminal(self, steps: list[tuple[str, str, str, list[str]]], deadline: float) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for name, label, kind, choices in steps:
            text = _prompt(label, kind, choices)
            for _ in range(MAX_TRIES):
                left = deadline - time.monotonic()
                if left <= 0:
                    return _unanswered("terminal", values)
                sys.stderr.write(f"\nThe agent asks: {text}\n> ")
                sys.stderr.flush()
                try:
                    line = await asyncio.wait_for(_read_terminal_line(), left)
                except TimeoutError:
                    return _unanswered("terminal", values)
                if line is None:
                    return _unanswered("terminal", values)
                value, why = parse_answer(line, kind, choices)
                if why is None:
                    values[name] = value
                    break
                text = f"{why}. {_prompt(label, kind, choices)}"
            else:
                raise ExecutionFailed(self.NAME, f"no valid answer for {name!r} after {MAX_TRIES} tries")
        return _answered(steps, values, "terminal", "terminal user")


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


def _answered(
    steps: list[tuple[str, str, str, list[str]]], values: dict[str, Any], channel: str, by: str
) -> dict[str, Any]:
    out: dict[str, Any] = {"answered": True, "channel": channel, "by": by, "untrusted": True}
    if len(steps) == 1 and steps[0][0] == "answer":
        out["answer"] = values["answer"]
    else:
        out["form"] = values
    return out


def _unanswered(channel: str, values: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"answered": False, "channel": channel, "reason": "no answer before the timeout"}
    if values:
        out["partial_form"] = values
        out["untrusted"] = True
    return out
