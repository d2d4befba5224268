"""Who the family's work runs as: the calling principal, the chains it stores, and consent through core.

The teams family runs work for another principal in three ways: a team member runs a task (live for
``team_delegate``, in the background for the dispatcher), and the scheduler runs cron jobs and heartbeats.
Each goes through core's delegation door:

- **consent** is asked when the work is set up, while the caller is on the line: enrolling an agent in
  a team, or naming another agent in a cron job or a heartbeat, calls :meth:`aleph.CallContext.delegate`,
  so the target's ``accepts_delegation_from`` or an operator's approval ("mallory wants admin to ... on
  its behalf") is required, and an unattended or non-operator caller without consent is refused;
- **the run** acts as the stored chain: the principal of the creator (with the chain it acted for) is
  kept beside the object, and the run's service is built for ``target acting for that chain``
  (:meth:`aleph.PluginContext.tool_service` with ``principal=``), so the intersection of every
  principal's policy applies and the weakest role of the chain. A run never acts as the target alone.
"""

from __future__ import annotations

import json
from typing import Any

import aleph
from aleph import Principal

__all__ = ["DEFAULT_AGENT", "caller_principal", "chain_record", "consent", "run_as"]

DEFAULT_AGENT = "main"
"""The caller when a call names no agent (a program calling without ``agent=``)."""

_ROLES = ("guest", "member", "operator")
MAX_CHAIN = 8


def caller_principal() -> Principal:
    """The principal of the running call (``main`` acting for itself outside a chokepoint call)."""
    principal = aleph.current_principal()
    if principal is None:
        return Principal(DEFAULT_AGENT)
    if principal.agent == "default":  # the host named no agent: the family's default caller
        return Principal(DEFAULT_AGENT, principal.channel, principal.session, principal.role, principal.chain)
    return principal


def chain_record(principal: Principal) -> str:
    """The principal and the chain it acts for, nearest first, as stored JSON (agents and roles)."""
    links = [{"agent": p.agent, "role": p.role} for p in (principal, *principal.chain)]
    return json.dumps(links[: MAX_CHAIN + 1], separators=(",", ":"))


def _links(record: str | None) -> list[dict[str, str]]:
    try:
        links = json.loads(record or "[]")
    except ValueError:
        links = []
    if not isinstance(links, list):
        return []
    return [
        {"agent": str(x["agent"]), "role": x["role"] if x.get("role") in _ROLES else "guest"}
        for x in links
        if isinstance(x, dict) and isinstance(x.get("agent"), str) and x["agent"]
    ]


def run_as(target: str, record: str | None, *, session: str | None = None) -> Principal:
    """The principal a stored piece of work runs as: ``target`` acting for the chain in ``record``.

    When ``target`` is the creator itself, it acts with the creator's own role and chain. A record
    that holds nothing (a row from before owners were kept) runs ``target`` as a guest.
    """
    links = _links(record)
    if not links:
        return Principal(target, None, session, "guest")
    roles = [x["role"] for x in links]
    weakest: Any = min(roles, key=_ROLES.index)
    if links[0]["agent"] == target:
        chain = tuple(Principal(x["agent"], None, None, x["role"]) for x in links[1:])
        return Principal(target, None, session, weakest, chain[:MAX_CHAIN])
    chain = tuple(Principal(x["agent"], None, None, x["role"]) for x in links)
    return Principal(target, None, session, weakest, chain[:MAX_CHAIN])


async def consent(tool: str, target: str, purpose: str) -> None:
    """Ask core's delegation door whether the caller may have ``target`` act on its behalf.

    Nothing to ask when ``target`` is the caller itself. Raises what the door raises
    (:class:`aleph.PermissionDenied`, :class:`aleph.ApprovalDenied`) when ``target`` has not accepted
    delegation from the caller's chain and no operator approves; outside a chokepoint call it refuses.
    """
    principal = caller_principal()
    if target == principal.agent:
        return
    call = aleph.current_call()
    if call is None:
        raise aleph.PermissionDenied(
            tool, f"acting for another agent ('{target}') needs a call through a tool service (the chokepoint)"
        )
    service = await call.delegate(target, purpose=purpose)
    budget = service.turn.budget if service.turn is not None else None
    if budget is not None:
        budget.release()  # consent only: the work itself reserves its own budget when it runs
