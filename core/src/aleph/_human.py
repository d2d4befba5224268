"""Asking the human from inside a tool: the question, the answer, and the channel the host binds.

A tool asks with ``await aleph.current_call().ask_human(question)``. Where the question goes is the
host's choice, never an argument: the host binds a :class:`HumanChannel` to the tool service it builds
(``rt.tool_service(human=...)``), as it binds an approval requester. ``aleph serve`` binds MCP
elicitation (both protocol eras); a program binds whatever reaches its user. Without one, asking is a
clear :class:`HumanUnavailable` error.

A question is a small form: fields of type string, number, integer or boolean, a string field may be
an enum, each field required or not, and a field may be ``secret`` (its answer is never recorded).
It is the subset MCP elicitation's ``requestedSchema`` allows, so any channel can render it.

The answer is data from a human and is checked against the question before the tool sees it: a
field of the wrong type, a value outside the enum, a missing required field or a field nobody asked
for is an error that names the field. Declined, cancelled and unanswered (timeout) are outcomes of
their own, not errors: the tool decides what each means.

**Ask before side effects.** A host that cannot wait inside a call (MCP 2026-07-28: the call answers
``input_required`` and the client retries with the answer) runs the tool again from the start with the
answer at hand: everything a tool does before it asks runs twice. A tool that asks must therefore ask
first, or keep what it does before asking idempotent.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal, Protocol, Self, runtime_checkable

from aleph._errors import ExecutionFailed, ToolError

__all__ = [
    "MAX_ANSWER_CHARS",
    "MAX_FIELDS",
    "MAX_QUESTIONS_PER_CALL",
    "DeferredHuman",
    "HumanAnswer",
    "HumanAnswerInvalid",
    "HumanChannel",
    "HumanField",
    "HumanInputRequired",
    "HumanOutcome",
    "HumanQuestion",
    "HumanUnavailable",
    "checked_answer",
]

MAX_FIELDS = 10
"""Fields one question may have."""
MAX_CHOICES = 50
MAX_ANSWER_CHARS = 4000
"""The longest string a field's answer may be."""
MAX_MESSAGE_CHARS = 4000
MAX_TIMEOUT_S = 3600.0
MAX_QUESTIONS_PER_CALL = 4
"""Questions one tool call may ask (each is a round trip to a person)."""

FieldKind = Literal["string", "number", "integer", "boolean"]
_NAME = re.compile(r"[a-z][a-z0-9_]{0,39}", re.ASCII)


class HumanOutcome(StrEnum):
    """How a question ended."""

    ACCEPTED = "accepted"
    """The person answered; :attr:`HumanAnswer.content` holds the checked answer."""
    DECLINED = "declined"
    """The person saw the question and chose not to answer it."""
    CANCELLED = "cancelled"
    """The person dismissed the question without deciding (closed the prompt)."""
    TIMEOUT = "timeout"
    """Nobody answered before the question's timeout."""


class HumanAnswerInvalid(ValueError):
    """An answer that does not fit its question; the message names the field."""


class HumanUnavailable(ExecutionFailed):
    """No person can be asked from here (no channel bound, or the channel cannot reach one)."""


class HumanInputRequired(ToolError):
    """The call needs a person's answer, and the host asked not to wait inside the call.

    Raised out of ``execute`` by a service whose human channel is a :class:`DeferredHuman`: the host
    shows :attr:`question`, then runs the same call again with the answer held under
    :meth:`HumanQuestion.digest`. The tool has not finished; what it did before asking runs again.
    """

    def __init__(self, tool: str, question: HumanQuestion) -> None:
        self.question = question
        super().__init__(tool, f"tool {tool} is waiting for a person's answer to: {question.message[:200]}")


@dataclass(frozen=True, slots=True)
class HumanField:
    """One field of a question."""

    name: str
    """The key of the field in the answer: ``[a-z][a-z0-9_]{0,39}``."""
    title: str = ""
    """What the person reads for this field (default: the name)."""
    kind: FieldKind = "string"
    choices: tuple[str, ...] = ()
    """For a string field: the only values allowed (an enum)."""
    required: bool = True
    secret: bool = False
    """The answer is never recorded (not on the ledger, not in logs)."""
    description: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.fullmatch(self.name):
            raise ValueError(f"field name {self.name!r} must match [a-z][a-z0-9_]{{0,39}}")
        if self.kind not in ("string", "number", "integer", "boolean"):
            raise ValueError(f"field {self.name!r}: kind {self.kind!r} is not string, number, integer or boolean")
        if self.choices:
            if self.kind != "string":
                raise ValueError(f"field {self.name!r}: only a string field may list choices")
            if len(self.choices) > MAX_CHOICES:
                raise ValueError(f"field {self.name!r}: at most {MAX_CHOICES} choices")
            if any(not isinstance(c, str) or not c.strip() or len(c) > 200 for c in self.choices):
                raise ValueError(f"field {self.name!r}: each choice must be 1 to 200 characters")
            if len(set(self.choices)) != len(self.choices):
                raise ValueError(f"field {self.name!r}: choices must be distinct")
        if len(self.title) > 300 or len(self.description) > 1000:
            raise ValueError(f"field {self.name!r}: the title is at most 300 and the description 1000 characters")

    def schema(self) -> dict[str, Any]:
        """The field as an MCP elicitation primitive schema."""
        out: dict[str, Any] = {"type": self.kind, "title": self.title or self.name}
        if self.description:
            out["description"] = self.description
        if self.choices:
            out["enum"] = list(self.choices)
        elif self.kind == "string":
            out["maxLength"] = MAX_ANSWER_CHARS
        return out

    def check(self, value: Any) -> Any:
        """``value`` as this field's typed value; raises :class:`HumanAnswerInvalid` naming the field."""
        if self.kind == "boolean":
            if isinstance(value, bool):
                return value
            raise HumanAnswerInvalid(f"field {self.name!r} must be true or false, got {_shown(value)}")
        if self.kind in ("number", "integer"):
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                raise HumanAnswerInvalid(f"field {self.name!r} must be a number, got {_shown(value)}")
            if self.kind == "integer":
                if isinstance(value, float) and not value.is_integer():
                    raise HumanAnswerInvalid(f"field {self.name!r} must be a whole number, got {_shown(value)}")
                return int(value)
            return value
        if not isinstance(value, str):
            raise HumanAnswerInvalid(f"field {self.name!r} must be text, got {_shown(value)}")
        if self.choices and value not in self.choices:
            raise HumanAnswerInvalid(f"field {self.name!r} must be one of {list(self.choices)}, got {_shown(value)}")
        if len(value) > MAX_ANSWER_CHARS:
            raise HumanAnswerInvalid(f"field {self.name!r} is {len(value)} characters; at most {MAX_ANSWER_CHARS}")
        return value


def _shown(value: Any) -> str:
    text = json.dumps(value, default=str) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


@dataclass(frozen=True, slots=True)
class HumanQuestion:
    """A question for a person: a message and the fields of the answer."""

    message: str
    fields: tuple[HumanField, ...]
    timeout_s: float = 300.0
    """How long to wait for the answer (at most an hour); then the outcome is TIMEOUT."""
    _digest: list[str] = field(default_factory=list, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.message, str) or not self.message.strip():
            raise ValueError("a question needs a message")
        if len(self.message) > MAX_MESSAGE_CHARS:
            raise ValueError(f"the question is {len(self.message)} characters; at most {MAX_MESSAGE_CHARS}")
        if not self.fields or len(self.fields) > MAX_FIELDS:
            raise ValueError(f"a question has 1 to {MAX_FIELDS} fields, not {len(self.fields)}")
        names = [f.name for f in self.fields]
        if len(set(names)) != len(names):
            raise ValueError("the fields of a question must have distinct names")
        if isinstance(self.timeout_s, bool) or not 0 < self.timeout_s <= MAX_TIMEOUT_S:
            raise ValueError(f"timeout_s must be more than 0 and at most {MAX_TIMEOUT_S:g} seconds")

    @classmethod
    def text(cls, message: str, *, title: str = "Answer", secret: bool = False, timeout_s: float = 300.0) -> Self:
        """A free-text question; the answer is in field ``answer``."""
        return cls(message, (HumanField("answer", title, secret=secret),), timeout_s)

    @classmethod
    def choice(cls, message: str, options: Sequence[str], *, timeout_s: float = 300.0) -> Self:
        """Pick one of ``options``; the answer is in field ``answer``."""
        return cls(message, (HumanField("answer", "Choice", choices=tuple(options)),), timeout_s)

    @classmethod
    def form(cls, message: str, fields: Sequence[HumanField], *, timeout_s: float = 300.0) -> Self:
        """A form of several fields."""
        return cls(message, tuple(fields), timeout_s)

    @classmethod
    def from_schema(cls, message: str, schema: Mapping[str, Any], *, timeout_s: float = 300.0) -> Self:
        """A question from an MCP-elicitation-style schema (an object of primitive properties).

        A property may carry ``"secret": true`` (Aleph's own key, never sent to a client). Anything
        outside the subset (nested objects, arrays, references) is refused with the property named.
        """
        if not isinstance(schema, Mapping) or schema.get("type") != "object":
            raise ValueError('the schema of a question must be {"type": "object", "properties": {...}}')
        props = schema.get("properties")
        if not isinstance(props, Mapping) or not props:
            raise ValueError("the schema of a question needs properties")
        required = schema.get("required", [])
        if not isinstance(required, list) or any(r not in props for r in required):
            raise ValueError("the schema's required list must name its properties")
        fields = []
        for name, prop in props.items():
            if not isinstance(prop, Mapping):
                raise ValueError(f"property {name!r} must be an object")
            kind = prop.get("type")
            if kind not in ("string", "number", "integer", "boolean"):
                raise ValueError(f"property {name!r}: type {kind!r} is not string, number, integer or boolean")
            choices = prop.get("enum", ())
            if not isinstance(choices, list | tuple):
                raise ValueError(f"property {name!r}: enum must be a list")
            fields.append(
                HumanField(
                    str(name),
                    str(prop.get("title", "")),
                    kind,
                    tuple(choices),
                    required=name in required,
                    secret=prop.get("secret") is True,
                    description=str(prop.get("description", "")),
                )
            )
        return cls(message, tuple(fields), timeout_s)

    def requested_schema(self) -> dict[str, Any]:
        """The question as MCP elicitation's ``requestedSchema`` (secrecy stays with Aleph)."""
        return {
            "type": "object",
            "properties": {f.name: f.schema() for f in self.fields},
            "required": [f.name for f in self.fields if f.required],
        }

    def digest(self) -> str:
        """What identifies this exact question (message, fields, secrecy): an answer binds to it."""
        if not self._digest:
            body = {"m": self.message, "s": self.requested_schema(), "x": sorted(self.secret_fields)}
            text = json.dumps(body, sort_keys=True, separators=(",", ":"))
            self._digest.append(hashlib.sha256(text.encode()).hexdigest()[:32])
        return self._digest[0]

    @property
    def secret_fields(self) -> frozenset[str]:
        """Names of the fields whose answers are never recorded."""
        return frozenset(f.name for f in self.fields if f.secret)

    def check(self, content: Any) -> dict[str, Any]:
        """The answer's content checked against the fields; raises :class:`HumanAnswerInvalid` naming one."""
        if content is None:
            content = {}
        if not isinstance(content, Mapping):
            raise HumanAnswerInvalid(f"the answer must be an object of fields, got {type(content).__name__}")
        known = {f.name: f for f in self.fields}
        for name in content:
            if name not in known:
                raise HumanAnswerInvalid(f"field {str(name)[:40]!r} was not asked for")
        out: dict[str, Any] = {}
        for f in self.fields:
            if f.name in content and content[f.name] is not None:
                out[f.name] = f.check(content[f.name])
            elif f.required:
                raise HumanAnswerInvalid(f"field {f.name!r} is required and was not answered")
        return out

    def recordable(self, content: Mapping[str, Any]) -> dict[str, Any]:
        """The answer without its secret fields (what may be recorded)."""
        secret = self.secret_fields
        return {k: v for k, v in content.items() if k not in secret}


@dataclass(frozen=True, slots=True)
class HumanAnswer:
    """How a question ended and, when the person answered, what they said."""

    outcome: HumanOutcome
    content: Mapping[str, Any] = field(default_factory=dict)
    """The answer's fields (checked against the question); empty unless ACCEPTED."""
    via: str = ""
    """Where the person answered (``mcp``, ``terminal``, a channel's name)."""
    by: str = ""
    """Who answered, as the channel knows them (a chat sender), when it says."""

    @property
    def accepted(self) -> bool:
        """The person answered."""
        return self.outcome is HumanOutcome.ACCEPTED

    def get(self, name: str = "answer", default: Any = None) -> Any:
        """One field of the answer (``answer`` for :meth:`HumanQuestion.text` and ``choice``)."""
        return self.content.get(name, default)


@runtime_checkable
class HumanChannel(Protocol):
    """Something that reaches the person a request came from: an MCP client's user, a terminal, a chat."""

    async def ask(self, question: HumanQuestion) -> HumanAnswer:
        """Ask and wait at most ``question.timeout_s``. Never raise for "no answer": return TIMEOUT.

        Raise :class:`HumanUnavailable` when nobody can be asked this way. The content returned is
        checked against the question by the caller; a channel need not check it.
        """
        ...


class DeferredHuman:
    """A channel that never waits: it answers from answers already given, or suspends the call.

    A question whose :meth:`~HumanQuestion.digest` has no answer here raises
    :class:`HumanInputRequired` out of ``execute``. The host asks the person, then makes the same
    call again over a service bound to a ``DeferredHuman`` holding the answer. An answer covers only
    the exact question it was given for, once.
    """

    def __init__(self, tool: str, answers: Mapping[str, HumanAnswer] | None = None) -> None:
        self._tool = tool
        self._answers = dict(answers or {})

    async def ask(self, question: HumanQuestion) -> HumanAnswer:
        """The held answer to this exact question (used once), else raise :class:`HumanInputRequired`."""
        answer = self._answers.pop(question.digest(), None)
        if answer is None:
            raise HumanInputRequired(self._tool, question)
        return answer


def checked_answer(tool: str, question: HumanQuestion, answer: Any) -> HumanAnswer:
    """What a channel returned, checked: a well-formed :class:`HumanAnswer` whose content fits the question.

    Raises :class:`~aleph.ExecutionFailed` naming the field for an answer that does not fit (it came
    from a person or a client: the tool never sees it unchecked).
    """
    if not isinstance(answer, HumanAnswer) or not isinstance(answer.outcome, HumanOutcome):
        raise ExecutionFailed(tool, f"the human channel answered with {type(answer).__name__}, not a HumanAnswer")
    if not answer.accepted:
        return HumanAnswer(answer.outcome, {}, answer.via, answer.by)
    try:
        content = question.check(answer.content)
    except HumanAnswerInvalid as exc:
        raise ExecutionFailed(tool, f"the person's answer does not fit the question: {exc}") from None
    return HumanAnswer(answer.outcome, content, answer.via, answer.by)
