"""Tools asking the MCP client's user (``CallContext.ask_human``) under ``aleph serve``, on both protocol eras.

- legacy (2025-11-25 and before): :class:`ElicitingHuman` sends ``elicitation/create`` (form mode) while
  the ``tools/call`` is open and waits at most the question's timeout; a client that declared no
  elicitation capability cannot be asked, and the tool is told so.
- 2026-07-28: the service is bound to a :class:`~aleph.DeferredHuman`; a question suspends the call,
  which answers ``input_required`` carrying the elicitation under :data:`QUESTION_KEY` and a sealed
  ``requestState`` (:class:`~aleph._mcp._serve_ask.AskState`: the question's digest, bound to the tool,
  its arguments, session, principal, client, a one-time nonce and an expiry). The client retries with
  the answer and the tool runs again from the start; its question is answered from the retry. A call
  may ask several questions, one round each (at most :data:`~aleph._human.MAX_QUESTIONS_PER_CALL`): the
  state carries the answers and approvals earlier rounds settled, so nothing is asked twice.

:class:`Carried` is what one ``tools/call`` knows from earlier rounds.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp_types as types
from mcp.server import ServerRequestContext

from aleph._chokepoint._approval import ApprovalDecision, ApprovalOutcome, ApprovalRequest, ApprovalResponse
from aleph._chokepoint._requesters import DeferredApprovals
from aleph._human import (
    MAX_QUESTIONS_PER_CALL,
    DeferredHuman,
    HumanAnswer,
    HumanOutcome,
    HumanQuestion,
    HumanUnavailable,
)
from aleph._mcp._serve_ask import APPROVAL_KEY, AskState, answer_from_elicitation, elicit_request, new_nonce

__all__ = [
    "MAX_CARRIED_BYTES",
    "QUESTION_KEY",
    "Carried",
    "ElicitingHuman",
    "Unreachable",
    "human_answer",
    "input_required",
    "question_request",
]

log = logging.getLogger("aleph.serve")

QUESTION_KEY = "aleph_question"
"""The ``input_requests`` key of a tool's question."""
MAX_CARRIED_BYTES = 64 * 1024
"""The most answers one call's state carries (the client sends them back on every retry)."""
MAX_ROUNDS = 8
"""Approvals one 2026-07-28 call may carry (a composite tool asks once per gated sub-call)."""

_ACTIONS = {"accept": HumanOutcome.ACCEPTED, "decline": HumanOutcome.DECLINED, "cancel": HumanOutcome.CANCELLED}


def human_answer(result: Any) -> HumanAnswer:
    """An elicitation result as a :class:`~aleph.HumanAnswer` (content unchecked: ``ask_human`` checks it)."""
    outcome = _ACTIONS.get(getattr(result, "action", None) or "")
    if outcome is None:
        return HumanAnswer(HumanOutcome.CANCELLED, via="mcp")
    content = getattr(result, "content", None)
    return HumanAnswer(outcome, content if outcome is HumanOutcome.ACCEPTED and content is not None else {}, via="mcp")


def question_request(question: HumanQuestion) -> types.ElicitRequest:
    """The embedded ``elicitation/create`` (form mode) of a 2026-07-28 ``input_required`` result."""
    params = types.ElicitRequestFormParams(message=question.message, requested_schema=question.requested_schema())
    return types.ElicitRequest(params=params)


def input_required(
    pending: ApprovalRequest | HumanQuestion, carried: Carried, asker: tuple[str | None, str, str]
) -> types.CallToolResult | types.InputRequiredResult:
    """The ``input_required`` answer of a 2026-07-28 round: the pending question and a sealed state.

    The state carries what earlier rounds settled, bound to ``asker`` (session, principal digest, client).
    """
    session, who, client = asker
    problem = None
    if carried.too_large():
        problem = "the answers given to this call are too long to carry to another round; ask shorter questions"
    elif isinstance(pending, HumanQuestion) and len(carried.answers) >= MAX_QUESTIONS_PER_CALL:
        # Also what a question that changes every time it is asked (a clock in its text) comes to.
        problem = (
            f"the tool asked more than {MAX_QUESTIONS_PER_CALL} questions in one call "
            "(or asked anew a question that was already answered)"
        )
    elif not isinstance(pending, HumanQuestion) and len(carried.granted) >= MAX_ROUNDS:
        problem = f"the tool asked for approval more than {MAX_ROUNDS} times in one call"
    if problem is not None:
        return types.CallToolResult(content=[types.TextContent(type="text", text=problem)], is_error=True)
    granted, given = carried.state_fields()
    if isinstance(pending, HumanQuestion):
        expires = time.time() + pending.timeout_s  # the question's own timeout, not only the state's lifetime
        state = AskState("", session or "", new_nonce(), (), who, client, pending.digest(), granted, given, expires)
        requests: dict[str, types.InputRequest] = {QUESTION_KEY: question_request(pending)}
        return types.InputRequiredResult(input_requests=requests, request_state=state.dump())
    request = pending
    if session is None:  # no session on this wire: "for this session" would be a promise not kept
        kept = tuple(d for d in request.allowed_decisions if d is not ApprovalDecision.ALLOW_SESSION)
        request = dataclasses.replace(request, allowed_decisions=kept)
    elicit, offered = elicit_request(request)
    state = AskState(request.fingerprint, session or "", new_nonce(), tuple(offered), who, client, "", granted, given)
    return types.InputRequiredResult(input_requests={APPROVAL_KEY: elicit}, request_state=state.dump())


def no_elicitation(tool: str) -> str:
    """What a tool is told when the client cannot be asked."""
    return (
        f"tool {tool} wanted to ask you a question, and this MCP client cannot be asked: it did not declare "
        "the elicitation capability. Decide without asking, or use an MCP client that supports elicitation."
    )


class ElicitingHuman:
    """The human channel of one legacy ``tools/call``: ``elicitation/create`` while the call is open."""

    def __init__(self, tool: str, ctx: ServerRequestContext[Any, Any], can_elicit: bool) -> None:
        self._tool = tool
        self._ctx = ctx
        self._can_elicit = can_elicit

    async def ask(self, question: HumanQuestion) -> HumanAnswer:
        """Ask the client's user and wait at most the question's timeout."""
        if not self._can_elicit:
            raise HumanUnavailable(self._tool, no_elicitation(self._tool))
        try:
            with anyio.fail_after(question.timeout_s):
                result = await self._ctx.session.elicit_form(
                    question.message, question.requested_schema(), related_request_id=self._ctx.request_id
                )
        except TimeoutError:
            return HumanAnswer(HumanOutcome.TIMEOUT, via="mcp")
        except Exception as exc:
            log.warning("elicitation failed: %s", exc)
            raise HumanUnavailable(self._tool, f"the MCP client's elicitation failed: {exc}") from None
        return human_answer(result)


class Unreachable:
    """The human channel of a 2026-07-28 call whose client cannot elicit: every question says so."""

    def __init__(self, tool: str) -> None:
        self._tool = tool

    async def ask(self, question: HumanQuestion) -> HumanAnswer:
        """Always :class:`~aleph.HumanUnavailable`."""
        raise HumanUnavailable(self._tool, no_elicitation(self._tool))


@dataclass
class Carried:
    """What earlier rounds of one 2026-07-28 ``tools/call`` settled: approvals granted, answers given."""

    granted: dict[str, ApprovalResponse] = field(default_factory=dict)
    answers: dict[str, tuple[str, Any]] = field(default_factory=dict)
    """Question digest → (outcome, content as the client sent it)."""

    def restore(self, granted: tuple[tuple[str, str], ...], answers: tuple[tuple[str, str, Any], ...]) -> None:
        """Take over what a verified state carries (entries of an unknown shape answer nothing)."""
        for fingerprint, outcome in granted:
            try:
                self.granted[fingerprint] = ApprovalResponse(ApprovalOutcome(outcome))
            except ValueError:
                continue
        known = {o.value for o in HumanOutcome}
        for digest, outcome, content in answers:
            if outcome in known:
                self.answers[digest] = (outcome, content)

    def take(self, state: AskState, answer: Any) -> None:
        """Take over a verified state and the client's answer to its question, for this call's next run.

        An answer to a question whose own timeout passed is no answer: the tool sees TIMEOUT.
        """
        self.restore(state.granted, state.answers)
        if state.question:
            late = time.time() > state.expires
            self.answer(state.question, HumanAnswer(HumanOutcome.TIMEOUT, via="mcp") if late else human_answer(answer))
        else:
            self.granted[state.fingerprint] = answer_from_elicitation(answer, state.offered)

    def answer(self, digest: str, answer: HumanAnswer) -> None:
        """Hold the answer to the question ``digest`` for this call's next run and later rounds."""
        self.answers[digest] = (answer.outcome.value, dict(answer.content) if answer.accepted else {})

    def approvals(self) -> DeferredApprovals:
        """A requester answering from the approvals held (for one run)."""
        return DeferredApprovals(self.granted)

    def human(self, tool: str) -> DeferredHuman:
        """A human channel answering from the answers held (for one run)."""
        held = {digest: HumanAnswer(HumanOutcome(o), c, "mcp") for digest, (o, c) in self.answers.items()}
        return DeferredHuman(tool, held)

    def state_fields(self) -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str, Any], ...]]:
        """(granted, answers) as a state carries them: only approving answers go on."""
        granted = tuple((fp, r.outcome.value) for fp, r in self.granted.items() if r.outcome.is_approved)
        answers = tuple((d, o, c) for d, (o, c) in self.answers.items())
        return granted, answers

    def too_large(self) -> bool:
        """Whether the answers are too large to send through the client again."""
        return len(json.dumps(self.state_fields(), default=str)) > MAX_CARRIED_BYTES
