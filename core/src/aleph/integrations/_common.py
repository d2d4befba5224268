"""What every framework integration shares: the framework import, the per-call service and the answers.

A framework hands Aleph a tool call with its own context (a run, a thread, a conversation) and, on
resume, its own record of what a human decided. :class:`CallBridge` turns that into one
:class:`aleph.ScopedToolService` per call — the framework's session key and call id in the turn, the
human's answer as a :class:`aleph.DeferredApprovals` bound to exactly this call's fingerprint — so the
chokepoint stays the only place that decides, asks, records and runs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from aleph import (
    ApprovalOutcome,
    ApprovalRequest,
    ApprovalResponse,
    DeferredApprovals,
    PermissionDenied,
    ScopedToolService,
    ToolDefinition,
    ToolOutput,
    TurnContext,
)
from aleph._chokepoint._once import once_id

__all__ = ["CallBridge", "approval_payload", "missing", "response_from"]

_ANSWERS = {outcome.value: outcome for outcome in ApprovalOutcome}
_MAX_TURNS = 256


def missing(what: str, extra: str, exc: ImportError) -> ImportError:
    """The error for a framework that is not installed: what is missing and what to install."""
    return ImportError(f"{what} not available: pip install 'aleph-core[{extra}]' ({exc})")


def approval_payload(request: ApprovalRequest) -> dict[str, Any]:
    """The JSON-safe form of an approval request that a framework carries to the human and back.

    ``summary`` and ``arguments`` are redacted and escaped by the chokepoint already.
    """
    return {
        "tool": request.tool_name,
        "summary": request.summary,
        "reason": request.reason,
        "rule_id": request.rule_id,
        "fingerprint": request.fingerprint,
        "allowed_decisions": [d.value for d in request.allowed_decisions],
        "arguments": request.arguments,
    }


def response_from(answer: Any) -> ApprovalResponse:
    """A human's answer in any of the forms the integrations accept, as an :class:`aleph.ApprovalResponse`.

    ``True`` / ``False``; an :class:`aleph.ApprovalResponse` or :class:`aleph.ApprovalOutcome`; an outcome's
    value (``"approved"``, ``"approved_for_session"``, ``"denied"``, ...); or a mapping
    ``{"outcome": ..., "reason": ...}``. Anything else is an error naming what was given.
    """
    if isinstance(answer, ApprovalResponse):
        return answer
    if isinstance(answer, bool):
        return ApprovalResponse(ApprovalOutcome.APPROVED if answer else ApprovalOutcome.DENIED)
    if isinstance(answer, ApprovalOutcome):
        return ApprovalResponse(answer)
    if isinstance(answer, str) and answer in _ANSWERS:
        return ApprovalResponse(_ANSWERS[answer])
    if isinstance(answer, Mapping) and isinstance(answer.get("outcome"), str) and answer["outcome"] in _ANSWERS:
        reason = answer.get("reason")
        return ApprovalResponse(_ANSWERS[answer["outcome"]], reason if isinstance(reason, str) else None)
    raise ValueError(
        f"not an approval answer: {answer!r}; give True/False, an aleph.ApprovalResponse or one of {sorted(_ANSWERS)}"
    )


class CallBridge:
    """One framework's view of a :class:`aleph.ScopedToolService`.

    ``service`` fixes the agent, channel, policy, tier and allow-set. Each call gets a service derived
    from it whose turn carries the framework's session key, run id and call id (the service's own turn
    supplies everything else), and whose requester is deferred: an "ask" never blocks, it raises
    :class:`aleph.ApprovalRequired` for the framework to suspend on.
    """

    def __init__(self, service: ScopedToolService) -> None:
        if not isinstance(service, ScopedToolService):
            raise TypeError(
                f"an integration runs over an aleph.ScopedToolService (rt.tool_service(...)), "
                f"not {type(service).__name__}"
            )
        self.service = service
        # Never answered, so it only ever suspends an ask: one serves every call that carries no answer.
        self._no_answer = DeferredApprovals()
        # The service's turn with a framework's session key and run id, by (key, run id), for the turn the
        # service has now: a run makes many calls under one key, and only the call id differs between them.
        self._turns_of: TurnContext | None = service.turn
        self._turns: dict[tuple[str | None, str | None], TurnContext] = {}

    async def definitions(self) -> list[ToolDefinition]:
        """What the chokepoint lists for this service now (denied tools are absent)."""
        return await self.service.list()

    async def schemas(self) -> dict[str, dict[str, Any]]:
        """Each listed tool's function form, exactly as Aleph sends it to a model, by name."""
        return {function["name"]: function for function in await self.service.dispatcher_schema()}

    def turn(self, *, session_key: str | None, run_id: str | None, call_id: str | None) -> TurnContext:
        """The service's turn with the framework's session key, run id and call id where it has them."""
        base = self.service.turn
        if base is not self._turns_of:  # the service was given another turn: what was derived is stale
            self._turns_of = base
            self._turns.clear()
        key = (session_key, run_id)
        run = self._turns.get(key)
        if run is None:
            start = base or TurnContext()
            run = dataclasses.replace(
                start, session_key=session_key or start.session_key, run_id=run_id or start.run_id
            )
            if len(self._turns) >= _MAX_TURNS:  # bounded: a long-lived bridge sees many conversations
                self._turns.clear()
            self._turns[key] = run
        if not call_id or call_id == run.call_id:
            return run
        return run.with_call_id(call_id)

    def scoped(
        self,
        name: str,
        arguments: Mapping[str, Any],
        *,
        session_key: str | None = None,
        run_id: str | None = None,
        call_id: str | None = None,
        answer: ApprovalResponse | None = None,
    ) -> ScopedToolService:
        """The service for one call; ``answer`` (the human's decision) covers exactly this call's arguments.

        An "allow once" answer is spent by the call it approves: the framework's state that carries it can be
        saved and resumed (or replayed) more than once, so the answer is bound to a one-time id of this
        principal, session, tool call id and fingerprint, which the gate records as used. The fingerprint is
        the one the chokepoint asks under for the service's principal.
        """
        turn = self.turn(session_key=session_key, run_id=run_id, call_id=call_id)
        service = self.service.derive(turn=turn, requester=self._no_answer)
        if answer is None:
            return service
        fingerprint = service.approval_fingerprint(name, arguments)
        if answer.once_id is None:
            principal = (self.service.agent, self.service.channel, turn.session_key, call_id, fingerprint)
            answer = dataclasses.replace(answer, once_id=once_id(*principal))
        service.requester = DeferredApprovals({fingerprint: answer})
        return service

    async def execute(
        self,
        name: str,
        arguments: Mapping[str, Any],
        *,
        session_key: str | None = None,
        run_id: str | None = None,
        call_id: str | None = None,
        answer: ApprovalResponse | None = None,
    ) -> ToolOutput:
        """Run one call through the chokepoint; raises :class:`aleph.ToolError` (``ApprovalRequired`` on an ask).

        A "no" is only ever carried to a call the chokepoint would ask about: a call it would run without
        asking (another layer of the framework asked) is refused here and never runs.
        """
        service = self.scoped(name, arguments, session_key=session_key, run_id=run_id, call_id=call_id, answer=answer)
        if answer is not None and not answer.outcome.is_approved and service.explain(name, arguments).decision != "ask":
            said = f' The user said: "{answer.deny_reason}".' if answer.deny_reason else ""
            raise PermissionDenied(name, f"the user did not approve running `{name}`.{said} Do not retry it.")
        return await service.execute(name, arguments)
