"""``ask_user``: a question to the human the agent works for, where the request came from.

Where the question goes is decided by who is calling, never by an argument, in this order: the request's
channel (an adapter of this family) and conversation, both bound by the host; else the human channel the
host bound to the tool service (MCP elicitation under ``aleph serve``, the terminal under ``aleph tools
call``); else nobody, and the tool says so. The tool is never tier-gated (core treats it as human contact), so
it takes no target: an agent cannot use it to message anyone else. An unattended run has nobody to ask.

Every route goes through :meth:`aleph.CallContext.ask_human`: the answer is checked against the question
and recorded on the call's ledger row (a ``secret`` field never is). Asking is the first thing the tool
does and it changes nothing else, so running it again (as the MCP 2026-07-28 era does, with the answer)
is safe: it is idempotent. Answers are untrusted content: the result says so.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

import aleph
from aleph import AlephTool, ExecutionFailed, HumanAnswer, HumanField, HumanOutcome, HumanQuestion, ToolArgs, ToolFacts
from aleph_channels._hub import ChannelHub
from aleph_channels._text_human import ChannelHuman
from aleph_channels._tools import owner_of_call

__all__ = ["AskUser", "FormField"]

_KINDS: dict[str, Literal["string", "number", "boolean"]] = {
    "text": "string",
    "number": "number",
    "yes_no": "boolean",
    "choice": "string",
}
_UNANSWERED = {
    HumanOutcome.DECLINED: "the person declined to answer",
    HumanOutcome.CANCELLED: "the person dismissed the question without answering",
    HumanOutcome.TIMEOUT: "no answer before the timeout",
}


class FormField(ToolArgs):
    name: str = Field(pattern=r"^[a-z][a-z0-9_]{0,39}$")
    """The key of this field in the answer (lowercase, digits, underscores)."""
    label: str = Field(min_length=1, max_length=300)
    """What the person is asked for this field."""
    kind: Literal["text", "number", "yes_no", "choice"] = "text"
    """What a valid answer is."""
    choices: list[str] = Field(default_factory=list, max_length=20)
    """For ``choice``: the options (the person may answer with the option or its number)."""
    secret: bool = False
    """The answer is sensitive (a code, a password): it is never recorded."""


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
        for options in [self.choices, *(f.choices for f in self.form)]:
            if any(len(c) > 200 or not c.strip() for c in options):
                raise ValueError("each choice must be 1 to 200 characters")
            if len(set(options)) != len(options):
                raise ValueError("the choices must be distinct")
        return self


def _question(args: AskArgs) -> HumanQuestion:
    if args.form:
        fields = tuple(
            HumanField(f.name, f.label, _KINDS[f.kind], tuple(f.choices) if f.kind == "choice" else (), secret=f.secret)
            for f in args.form
        )
        return HumanQuestion.form(args.question, fields, timeout_s=args.timeout_s)
    if args.choices:
        return HumanQuestion.choice(args.question, args.choices, timeout_s=args.timeout_s)
    return HumanQuestion.text(args.question, timeout_s=args.timeout_s)


class AskUser(AlephTool[AskArgs]):
    NAME = "ask_user"
    DESCRIPTION = (
        "Ask the human you work for a question and wait for the answer: free text, one of some choices, or a "
        "short form. It goes to the person this request came from (their conversation, their MCP client, or the "
        "terminal); it cannot message anyone else. Use it when you need a decision or a fact only the person has."
    )
    Args = AskArgs
    # Idempotent: asking changes nothing but the conversation, and a retry with the answer is how the
    # MCP 2026-07-28 era completes it. Its ledger row comes from the answer it records.
    FACTS = ToolFacts(idempotent=True, concurrent_safe=True, max_duration_ms=630_000, tags=("human", "channels"))

    def __init__(self, hub: ChannelHub) -> None:
        self._hub = hub

    @property
    def hub(self) -> ChannelHub:
        """The channel hub this tool asks through (the host reads inboxes from it)."""
        return self._hub

    async def call(self, args: AskArgs) -> dict[str, Any]:
        call = aleph.current_call()
        if call is None:
            raise ExecutionFailed(self.NAME, "ask_user runs through a tool service (rt.tool_service(...))")
        turn = call.turn
        if turn is not None and turn.unattended:
            raise ExecutionFailed(self.NAME, "nobody is watching this run (it is unattended): decide without asking")
        question = _question(args)
        channel = call.channel
        through: aleph.HumanChannel | None = None
        if channel and channel in self._hub.adapters:
            conversation = turn.conversation_id if turn is not None else ""
            if not conversation:
                raise ExecutionFailed(
                    self.NAME,
                    f"the request on channel {channel!r} names no conversation to ask in "
                    "(the host passes it as TurnContext(conversation_id=...))",
                )
            through = ChannelHuman(self._hub, channel, conversation, owner_of_call())
        elif not call.can_ask_human:
            raise ExecutionFailed(
                self.NAME,
                "no way to reach a person from here: this request came from no channel adapter and the host "
                "bound no human channel (aleph serve asks through MCP elicitation, aleph tools call on a "
                "terminal); decide without asking, or configure [channel_adapters.<name>] for the channel "
                "the host uses",
            )
        return _result(await call.ask_human(question, through=through), bool(args.form))


def _result(answer: HumanAnswer, form: bool) -> dict[str, Any]:
    channel = answer.via or "host"
    if not answer.accepted:
        why = _UNANSWERED[answer.outcome]
        return {"answered": False, "outcome": answer.outcome.value, "channel": channel, "reason": why}
    out: dict[str, Any] = {"answered": True, "outcome": "accepted", "channel": channel, "untrusted": True}
    if answer.by:
        out["by"] = answer.by
    if form:
        out["form"] = dict(answer.content)
    else:
        out["answer"] = answer.content.get("answer")
    return out
