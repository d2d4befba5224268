"""The one door for acting as another agent: :meth:`aleph.CallContext.delegate`.

A delegated service is built for principal ``agent`` acting for the caller's chain. It can only narrow:

- **policy**: every layer of the delegating service (global, each agent of the chain, channel and
  request layers) plus the delegate's own agent layer, so the most restrictive decision of any principal
  in the chain wins (deny > ask > allow);
- **allow-set**: the intersection of the delegating service's and the delegate's;
- **tier**: the strictest of the two; **role**: the chain's weakest; **turn flags** (unattended, plan
  mode, side question): kept once set;
- **budget**: a reservation out of the delegating turn's budget (``Budget.reserve``), however deep.

Consent: every agent of the delegating chain must be listed in the delegate's
``[agents.<agent>] accepts_delegation_from`` (or ``"*"``), or an operator approves through the approval
gate ("mallory wants admin to ... on its behalf"). An unattended run without consent is refused, and
a caller that is not an operator cannot approve it. Every decision is recorded on the ledger.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from aleph._chokepoint._approval import ApprovalOutcome, ApprovalRequest
from aleph._chokepoint._budget import Budget, BudgetExhausted
from aleph._chokepoint._gate import allowed_decisions, escape_for_prompt, grant_fingerprint
from aleph._chokepoint._permissions import PermissionPolicy
from aleph._chokepoint._scoped import ScopedToolService
from aleph._errors import ApprovalDenied, PermissionDenied
from aleph._ledger import LedgerRecord
from aleph._principal import MAX_DELEGATION_DEPTH, Principal
from aleph._turn import TurnContext

if TYPE_CHECKING:
    from aleph._chokepoint._layers import AccessControl
    from aleph._ledger import LedgerAction, LedgerOutcome

__all__ = ["Delegator"]

log = logging.getLogger("aleph")

_AGENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", re.ASCII)
MAX_PURPOSE = 500
_BUDGET_KEYS = frozenset({"calls", "wall_seconds", "tokens", "cost"})
_POLICY_CACHE = 256


class Delegator:
    """Builds delegated services for one runtime (installed as ``Chokepoint.delegator``)."""

    def __init__(self, access: AccessControl) -> None:
        self.access = access
        self._policies: dict[tuple[int, str], PermissionPolicy] = {}
        self._lock = threading.Lock()

    async def __call__(
        self,
        service: ScopedToolService,
        agent: str,
        *,
        purpose: str,
        budget: Mapping[str, float] | None = None,
        turn: TurnContext | None = None,
    ) -> ScopedToolService:
        """The service for ``agent`` acting for ``service``'s principal (see the module docstring)."""
        parent = service.principal
        if not isinstance(agent, str) or not _AGENT.fullmatch(agent):
            raise PermissionDenied("delegate", f"{agent!r} is not an agent name ([A-Za-z0-9_.-], at most 64)")
        if not isinstance(purpose, str) or not purpose.strip():
            raise PermissionDenied("delegate", "say what the delegated work is for (purpose=...)")
        purpose = purpose.strip()[:MAX_PURPOSE]
        limits = _check_budget(budget)
        if parent.depth + 1 > MAX_DELEGATION_DEPTH:
            reason = f"delegation chains hold at most {MAX_DELEGATION_DEPTH} principals; {agent} was not asked"
            await _record(service, agent, "tool_denied", "denied", reason)
            raise PermissionDenied("delegate", reason)
        session = turn.session_key if turn is not None and turn.session_key else None
        if session is not None and service._cp.owners.claim(session, agent) != agent:
            raise PermissionDenied("delegate", f"session {session!r} belongs to another agent")
        await self._consent(service, agent, purpose)
        child = parent.acting_as(agent, session=session)
        child_budget = _child_budget(service, child, limits)
        child_turn = _child_turn(service.turn, turn, child, child_budget)
        bounded = self.access.bounds((agent,))  # the delegate and every agent it is bounded by
        tier = min(service.tier, *(self.access.tier(a, parent.channel, None, child_turn) for a in bounded))
        allowed = _intersect(service.allowed, self.access.chain_allowed(bounded))
        delegated = ScopedToolService(
            service._cp,
            policy=self._policy(service.policy, agent),
            tier=tier,
            agent=agent,
            channel=parent.channel,
            turn=child_turn,
            requester=service.requester,
            allowed=allowed,
            human=service.human,
            principal=child,
        )
        await _record(service, agent, "tool_call", "ok", f"{child.describe()}: {purpose}")
        return delegated

    def _policy(self, base: PermissionPolicy, agent: str) -> PermissionPolicy:
        """The delegating policy's layers plus ``agent``'s own (cached per pair, bounded)."""
        layers = [self.access.agent_layers[a] for a in self.access.bounds((agent,)) if a in self.access.agent_layers]
        if not layers:
            return base
        key = (base.token, agent)
        hit = self._policies.get(key)
        if hit is None:
            with self._lock:
                if len(self._policies) >= _POLICY_CACHE:
                    self._policies.clear()
                hit = self._policies.setdefault(key, PermissionPolicy([*base.layers, *layers]))
        return hit

    async def _consent(self, service: ScopedToolService, agent: str, purpose: str) -> None:
        """Config consent, else an operator's approval through the gate; raises when neither is given."""
        parent = service.principal
        accepted = self.access.accepts_delegation(agent, parent.agents)
        if accepted:
            return
        who = parent.agent if not parent.chain else f"{parent.agent} (for {', '.join(parent.agents[1:])})"
        asks = f"{who} wants {agent} to {purpose} on its behalf"
        unattended = service.turn is not None and service.turn.unattended
        if unattended or not parent.is_operator() or service.requester is None:
            why = (
                "the run is unattended"
                if unattended
                else "no approval channel is available"
                if service.requester is None
                else f"a {parent.role} cannot approve it"
            )
            reason = (
                f"{agent} has not accepted delegation from {who} ([agents.{agent}] accepts_delegation_from) and "
                f"{why}, so no operator can approve it. Do not retry; ask the operator."
            )
            await _record(service, agent, "tool_denied", "denied", reason)
            raise PermissionDenied("delegate", reason)
        fingerprint = service._bound_fingerprint(grant_fingerprint("delegate", {"agent": agent}))
        request = ApprovalRequest(
            tool_name="delegate",
            summary=escape_for_prompt(asks),
            reason=f"{agent} has not accepted delegation from {escape_for_prompt(who)}",
            rule_id="delegation",
            allowed_decisions=allowed_decisions("delegation", True),
            fingerprint=fingerprint,
            arguments={"agent": agent, "for": list(parent.agents), "purpose": purpose},
            turn=service.turn,
        )
        outcome = await service._cp.gate.confirm(
            service.requester, request, session_key=service._grant_scope(), unattended=False
        )
        action: LedgerAction = "approval_granted" if outcome.approved else "approval_denied"
        await _record(service, agent, action, "ok" if outcome.approved else "denied", asks)
        if outcome.approved:
            return
        said = f' The operator said: "{escape_for_prompt(outcome.deny_reason)}".' if outcome.deny_reason else ""
        text = f"{asks}: not approved ({outcome.outcome.value}).{said} Do not retry; do the work yourself or ask."
        if outcome.outcome in (ApprovalOutcome.TIMEOUT, ApprovalOutcome.UNAVAILABLE):
            raise PermissionDenied("delegate", text)
        raise ApprovalDenied("delegate", text)


def _check_budget(budget: Mapping[str, float] | None) -> dict[str, Any] | None:
    if budget is None:
        return None
    if not isinstance(budget, Mapping):
        raise PermissionDenied("delegate", "budget must be a mapping such as {'calls': 3}")
    unknown = set(budget) - _BUDGET_KEYS
    if unknown:
        raise PermissionDenied("delegate", f"unknown budget keys {sorted(unknown)}; use {sorted(_BUDGET_KEYS)}")
    return dict(budget)


def _child_budget(service: ScopedToolService, child: Principal, limits: dict[str, Any] | None) -> Budget | None:
    parent = service.turn.budget if service.turn is not None else None
    name = f"{child.agent} for {child.chain[0].agent}" if child.chain else child.agent
    try:
        if parent is not None:
            return parent.reserve(name=name, **(limits or {}))
        return Budget(name=name, **limits) if limits else None
    except (BudgetExhausted, ValueError) as exc:
        raise PermissionDenied("delegate", f"{exc}. The delegated work was not started.") from None


def _child_turn(
    parent: TurnContext | None, asked: TurnContext | None, child: Principal, budget: Budget | None
) -> TurnContext:
    """The delegated turn: the asked-for session and refs, flags that only tighten, the chain's role."""
    base = asked if asked is not None else TurnContext()
    return TurnContext(
        session_key=child.session or "",
        run_id=base.run_id or (parent.run_id if parent is not None else ""),
        channel_id=parent.channel_id if parent is not None else base.channel_id,
        conversation_id=base.conversation_id,
        caller_role=child.role,
        unattended=base.unattended or (parent is not None and parent.unattended),
        plan_mode=base.plan_mode or (parent is not None and parent.plan_mode),
        side_question=base.side_question or (parent is not None and parent.side_question),
        principal=child.user,
        call_id=base.call_id,
        budget=budget,
        idempotency_key=base.idempotency_key,
        refs=base.refs,
    )


def _intersect(a: frozenset[str] | None, b: frozenset[str] | None) -> frozenset[str] | None:
    if a is None:
        return b
    if b is None:
        return a
    return a & b


async def _record(
    service: ScopedToolService, agent: str, action: LedgerAction, outcome: LedgerOutcome, detail: str
) -> None:
    ledger = service._cp.ledger
    if ledger is None:
        return
    try:
        await ledger.append(
            LedgerRecord(
                agent_id=service._agent_id(),
                action=action,
                target="delegate",
                outcome=outcome,
                detail=detail[:2000],
                principal=service._principal_text(),
                rule="delegation",
                refs={"delegate_to": agent},
            )
        )
    except Exception:
        log.exception("ledger append failed; the delegation's result is unchanged")
