"""The running call, readable by tools through :func:`current_call`.

The chokepoint sets a :class:`CallContext` for the duration of each tool call. Through it a tool
submits the actions it is made of (:meth:`CallContext.subcall`: each one judged under its own name
and arguments, with its own ledger row), attaches references to its own ledger row
(:meth:`CallContext.annotate`), records provenance that is not a mutating call
(:meth:`CallContext.record`), learns who is calling (:attr:`CallContext.principal`), asks the person
the request came from (:meth:`CallContext.ask_human`, through the channel the host bound), runs work as
another agent through the one delegation door (:meth:`CallContext.delegate`) and binds session keys
to their owner (:meth:`CallContext.claim_session`).
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections.abc import Mapping
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Protocol

from aleph._chokepoint._gate import redact_arguments
from aleph._contract._types import ToolOutput
from aleph._errors import ExecutionFailed
from aleph._human import (
    MAX_QUESTIONS_PER_CALL,
    HumanAnswer,
    HumanAnswerInvalid,
    HumanChannel,
    HumanOutcome,
    HumanQuestion,
    HumanUnavailable,
    checked_answer,
)
from aleph._principal import Principal
from aleph._turn import TurnContext

if TYPE_CHECKING:
    from aleph._chokepoint._roles import Explained

__all__ = ["MAX_REFS", "MAX_SUBCALL_DEPTH", "CallContext", "current_call", "current_principal"]

MAX_REFS = 16
"""References one call may carry on its ledger row."""
MAX_REF_VALUE = 256
MAX_UNTRUSTED_PARTS = 1024
"""Parts of one output a tool may mark untrusted; past it the whole output counts as untrusted."""
MAX_SUBCALL_DEPTH = 8
"""Composite tools may nest this deep (a workflow step running a batch running an action)."""

_REF_KEY = re.compile(r"[a-z][a-z0-9_]{0,31}", re.ASCII)


class _Service(Protocol):
    """What a call context needs from the scoped service that runs the call."""

    human: HumanChannel | None

    async def execute(self, name: str, input: Mapping[str, Any]) -> ToolOutput: ...

    def explain(self, name: str, input: Mapping[str, Any] | None = None) -> Explained: ...

    async def record_event(self, call: CallContext, event: str, detail: str, refs: Mapping[str, str]) -> None: ...

    async def authorize(self, name: str, input: Mapping[str, Any]) -> None: ...

    def decision_for(self, name: str, input: Mapping[str, Any]) -> str: ...

    async def delegate(
        self,
        agent: str,
        *,
        purpose: str,
        budget: Mapping[str, float] | None = None,
        turn: TurnContext | None = None,
    ) -> Any: ...

    def claim_session(self, key: str) -> bool: ...

    def owns_session(self, key: str) -> bool: ...


def check_refs(refs: Mapping[str, Any]) -> dict[str, str]:
    """Validate references: keys ``[a-z][a-z0-9_]{0,31}``, values stringified and at most 256 characters."""
    out = {}
    for key, value in refs.items():
        if not isinstance(key, str) or not _REF_KEY.fullmatch(key):
            raise ValueError(f"ledger reference key {key!r} must match [a-z][a-z0-9_]{{0,31}}")
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise ValueError(f"ledger reference {key!r} must be a string or a number, got {type(value).__name__}")
        text = str(value)
        if len(text) > MAX_REF_VALUE:
            raise ValueError(f"ledger reference {key!r} is {len(text)} characters; the limit is {MAX_REF_VALUE}")
        out[key] = text
    return out


class CallContext:
    """One running tool call: who is calling, and how the tool reaches the chokepoint again.

    Obtain it with :func:`aleph.current_call` inside a tool's ``call``.
    """

    __slots__ = (
        "_asked",
        "_call_id",
        "_refs",
        "_service",
        "_untrusted",
        "agent",
        "channel",
        "decision",
        "depth",
        "parent",
        "principal",
        "tool",
        "turn",
    )

    def __init__(
        self,
        service: _Service,
        tool: str,
        *,
        agent: str | None,
        channel: str | None,
        turn: TurnContext | None,
        call_id: str | None = None,
        parent: CallContext | None = None,
        decision: str = "allow",
        principal: Principal | None = None,
    ) -> None:
        if principal is None:
            principal = Principal(agent or "default", channel or None)
        if call_id is None and parent is None and turn is not None and turn.call_id:
            call_id = turn.call_id
        self._fill(service, tool, agent, channel, turn, parent, decision, principal, call_id)

    @classmethod
    def running(
        cls,
        service: _Service,
        tool: str,
        agent: str | None,
        channel: str | None,
        turn: TurnContext | None,
        parent: CallContext | None,
        decision: str,
        principal: Principal,
    ) -> CallContext:
        """The context the chokepoint sets for a call it runs: ``__init__``'s result, built without its defaults.

        Built once per call on the hot path, where keyword parsing costs as much as the rest of it.
        """
        self = object.__new__(cls)
        call_id = turn.call_id or None if parent is None and turn is not None else None
        self._fill(service, tool, agent, channel, turn, parent, decision, principal, call_id)
        return self

    def _fill(
        self,
        service: _Service,
        tool: str,
        agent: str | None,
        channel: str | None,
        turn: TurnContext | None,
        parent: CallContext | None,
        decision: str,
        principal: Principal,
        call_id: str | None,
    ) -> None:
        self._service = service
        self.tool = tool
        """The canonical name of the running tool."""
        self.decision = decision
        """How the chokepoint decided this call before it ran: ``allow``, or ``ask`` (and a human approved)."""
        self.agent = agent
        self.channel = channel
        self.turn = turn
        self.principal: Principal = principal
        """Who is calling: bound by the host when it built the service; no argument changes it."""
        self.parent = parent
        """The composite call this one is an action of, if any."""
        self._call_id = call_id
        self._asked = 0
        self._untrusted: list[tuple[str, str]] | None = None
        if parent is None:
            self.depth: int = 0
            self._refs: dict[str, str] = {}
        else:
            self.depth = parent.depth + 1
            self._refs = {"parent_call": parent.call_id}
        if turn is not None and turn.refs:  # the turn's own references (a team member's team and task)
            self._refs.update(check_refs(dict(turn.refs)))

    @property
    def call_id(self) -> str:
        """The model's call id for a top-level call, else one generated when first asked for."""
        if self._call_id is None:
            self._call_id = uuid.uuid4().hex[:16]
        return self._call_id

    @property
    def refs(self) -> dict[str, str]:
        """References recorded on this call's ledger row so far (a copy)."""
        return dict(self._refs)

    @property
    def annotated(self) -> bool:
        """Whether the tool or the turn attached references (a read-only call then gets a row too)."""
        refs = self._refs
        return bool(refs) and any(key != "parent_call" for key in refs)

    def annotate(self, **refs: str | int | float) -> None:
        """Attach references (``team_id=``, ``task_id=``, ``memory_id=``, ...) to this call's signed ledger row."""
        checked = check_refs(refs)
        if len(self._refs.keys() | checked.keys()) > MAX_REFS:
            raise ValueError(f"a call carries at most {MAX_REFS} ledger references")
        self._refs.update(checked)

    @property
    def can_ask_human(self) -> bool:
        """Whether the host bound a channel to a person (:meth:`ask_human` may still find nobody there)."""
        return self._service.human is not None

    async def ask_human(self, question: HumanQuestion, *, through: HumanChannel | None = None) -> HumanAnswer:
        """Ask the person this request came from, through the channel the host bound; wait for the answer.

        Returns how it ended: ACCEPTED with the answer checked against the question, or DECLINED,
        CANCELLED or TIMEOUT. Raises :class:`~aleph.HumanUnavailable` when nobody can be asked, and
        :class:`~aleph.ExecutionFailed` naming the field when the answer does not fit the question.
        The outcome and the answer (without secret fields) go on this call's ledger row. A call asks
        at most four questions. Ask before any side effect: a host that cannot wait inside a call
        runs the tool again from the start with the answer (see :mod:`aleph._human`).

        ``through`` is for a tool that itself reaches the same person where the request came from (a
        channel family's adapter for the request's own channel and conversation); it is never chosen
        from a tool argument. The answer is checked and recorded the same way.
        """
        channel = through if through is not None else self._service.human
        if channel is None:
            raise HumanUnavailable(
                self.tool,
                "nobody can be asked from here: the host bound no human channel to this request "
                "(rt.tool_service(human=...)); decide without asking",
            )
        if self._asked >= MAX_QUESTIONS_PER_CALL:
            raise ExecutionFailed(self.tool, f"a call asks a person at most {MAX_QUESTIONS_PER_CALL} questions")
        self._asked += 1
        try:
            answer = await asyncio.wait_for(channel.ask(question), question.timeout_s + 5)
        except TimeoutError:
            answer = HumanAnswer(HumanOutcome.TIMEOUT)
        except HumanAnswerInvalid as exc:  # a text channel got no reply that fits
            raise ExecutionFailed(self.tool, f"the person's answer does not fit the question: {exc}") from None
        except HumanUnavailable as exc:
            if exc.tool:
                raise
            raise HumanUnavailable(self.tool, exc.cause) from None  # a channel does not know the tool's name
        answer = checked_answer(self.tool, question, answer)
        suffix = "" if self._asked == 1 else f"_{self._asked}"
        refs: dict[str, str] = {f"human_outcome{suffix}": answer.outcome.value}
        if answer.accepted:
            shown = json.dumps(redact_arguments(question.recordable(answer.content)), separators=(",", ":"))
            refs[f"human_answer{suffix}"] = shown if len(shown) <= 256 else shown[:253] + "..."
        if len(self._refs.keys() | refs.keys()) <= MAX_REFS:  # a row full of the tool's own refs keeps them
            self._refs.update(refs)
        return answer

    def mark_untrusted(self, text: str, source: str) -> None:
        """Say that ``text``, part of this call's output, comes from the untrusted ``source`` (``"e-mail body"``).

        For a tool whose output mixes the user's own structured data with third-party text (a message's
        body beside its sender and date): the marked parts are tracked as untrusted and the rest of the
        output as trusted. A tool whose facts declare ``untrusted_output`` needs none of this: all of its
        output is untrusted. See docs/dataflow.md.
        """
        if not isinstance(text, str) or not isinstance(source, str):
            raise TypeError("mark_untrusted takes the text and a source label, both strings")
        marks = self._untrusted if self._untrusted is not None else []
        if len(marks) < MAX_UNTRUSTED_PARTS:
            marks.append((text, source))
        else:  # past the cap the whole output counts as untrusted (fails closed)
            marks[-1] = ("", source)
        self._untrusted = marks

    @property
    def untrusted_parts(self) -> tuple[tuple[str, str], ...]:
        """(text, source) of every part the tool marked untrusted (see :meth:`mark_untrusted`)."""
        return tuple(self._untrusted or ())

    async def subcall(self, name: str, input: Mapping[str, Any]) -> ToolOutput:
        """Run one action of this composite call through the chokepoint, under its own name and arguments.

        The same agent, channel, turn, tier and approval channel apply; the action gets its own ledger
        row (with ``parent_call`` naming this call). Raises :class:`~aleph.ToolError` like ``execute``.
        """
        if self.depth + 1 > MAX_SUBCALL_DEPTH:
            raise ExecutionFailed(
                self.tool, f"composite calls nest at most {MAX_SUBCALL_DEPTH} deep; `{name}` was not run"
            )
        token = _CALL.set(self)  # execute() reads the parent from the context
        try:
            return await self._service.execute(name, input)
        finally:
            _CALL.reset(token)

    def explain(self, name: str, input: Mapping[str, Any] | None = None) -> Explained:
        """The chokepoint's decision for an action of this call, without running it."""
        return self._service.explain(name, input)

    async def authorize(self, name: str, input: Mapping[str, Any]) -> None:
        """Pass every gate for a step this tool performs itself (asking a human if the rules say so).

        For a step that must meet the same rules as the call that started it, such as each redirect hop
        of a fetch: ``await call.authorize("web_fetch", {**arguments, "url": next_url})``. Raises like
        ``execute`` (``PermissionDenied``, ``ApprovalDenied``, ...); the refusal is recorded.
        """
        if self.depth + 1 > MAX_SUBCALL_DEPTH:
            raise ExecutionFailed(self.tool, f"composite calls nest at most {MAX_SUBCALL_DEPTH} deep")
        token = _CALL.set(self)
        try:
            await self._service.authorize(name, input)
        finally:
            _CALL.reset(token)

    def permits(self, name: str, input: Mapping[str, Any]) -> str:
        """The decision (``allow``/``ask``/``deny``) for a call of ``name`` with ``input``, without asking.

        A listing or search uses it to leave out what the caller could not have asked for by name, e.g.
        ``call.permits("file_read", {"path": hit}) == "deny"``. Sync and cheap when no argument rule applies.
        """
        return self._service.decision_for(name, input)

    async def record(self, event: str, detail: str = "", **refs: str | int | float) -> None:
        """Append a signed ``tool_event`` row for this call (provenance that is not itself a mutating call)."""
        checked = check_refs({"event": event, **refs})
        if len(checked) > MAX_REFS:
            raise ValueError(f"a ledger event carries at most {MAX_REFS} references")
        await self._service.record_event(self, event, detail, checked)

    async def delegate(
        self,
        agent: str,
        *,
        purpose: str,
        budget: Mapping[str, float] | None = None,
        turn: TurnContext | None = None,
    ) -> Any:
        """A tool service for ``agent`` acting for this call's principal: the one door to act as another agent.

        The returned :class:`~aleph.ScopedToolService` judges every call by the intersection of every
        principal in the chain (each one's layers, most restrictive wins; allow-sets intersected; the
        strictest tier; the weakest role), so delegation never gains a permission. Its budget is a
        reservation out of this call's budget (``budget={"calls": 3}`` sets a cap of its own; keys
        ``calls``, ``wall_seconds``, ``tokens``, ``cost``). ``agent`` must
        consent (``[agents.<agent>] accepts_delegation_from``) or an operator must approve through the
        approval gate ("mallory wants admin to ... on its behalf"); unattended, without consent, it is
        refused. ``turn`` sets the delegated work's own session and flags (never its principal).
        Raises :class:`~aleph.PermissionDenied` (no consent, too deep, budget does not fit) or
        :class:`~aleph.ApprovalDenied`; the decision is recorded on the ledger.
        """
        token = _CALL.set(self)
        try:
            return await self._service.delegate(agent, purpose=purpose, budget=budget, turn=turn)
        finally:
            _CALL.reset(token)

    def claim_session(self, key: str) -> bool:
        """Bind session ``key`` to this principal's owner if nobody has used it; whether it is (now) its own.

        A family calls it before it opens, rotates or reads a session named by anything but the
        principal itself (``session_new``, a trace by session): ``False`` means the key belongs to
        another agent, and the family answers exactly as for a missing session.
        """
        return self._service.claim_session(key)

    def owns_session(self, key: str) -> bool:
        """Whether session ``key`` belongs to this principal's owner (an unused key belongs to nobody: False)."""
        return self._service.owns_session(key)


_CALL: ContextVar[CallContext | None] = ContextVar("aleph_call", default=None)


def current_call() -> CallContext | None:
    """The tool call running in this task, or None outside a call."""
    return _CALL.get()


def current_principal() -> Principal | None:
    """Who is calling: the running call's principal (see :class:`aleph.Principal`), or None outside a call."""
    call = _CALL.get()
    return call.principal if call is not None else None
