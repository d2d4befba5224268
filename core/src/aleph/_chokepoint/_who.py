"""Who is calling, as the chokepoint sees it: the bound principal, roles, sessions and the delegation door.

The identity half of :class:`~aleph.ScopedToolService` (a mixin: it reads the service's fields). The
principal is fixed when the service is built; everything here reads it, nothing here takes it from a
tool argument.
"""

from __future__ import annotations

import dataclasses
import hashlib
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self

from aleph._chokepoint._defprint import definition_bound, nulls_bound
from aleph._chokepoint._gate import grant_fingerprint
from aleph._chokepoint._secretbind import secrets_bound
from aleph._errors import PermissionDenied
from aleph._principal import Principal, weakest_role
from aleph._turn import TurnContext

if TYPE_CHECKING:
    from aleph._chokepoint._shared import Chokepoint
    from aleph._contract._registry import RegisteredTool

__all__ = ["Identity", "bound_role", "principal_for"]


def principal_for(
    agent: str | None, channel: str | None, turn: TurnContext | None, role: str | None = None
) -> Principal:
    """The principal a host means by (agent, channel, turn): the turn's session key, caller role and user.

    ``role`` is the channel's configured role, used when the turn names none; no role at all is an operator.
    """
    if turn is None:
        return Principal(agent or "default", channel or None, None, _role(role))
    return Principal(
        agent or "default",
        channel or None,
        turn.session_key or None,
        _role(turn.caller_role or role),
        (),
        turn.principal,
    )


def bound_role(principal: Principal, turn: TurnContext | None) -> tuple[Principal, TurnContext | None]:
    """A principal a host passed whole, and the turn, both carrying one role: the weakest of them all.

    Tiers and plugin votes read the turn's ``caller_role`` (none counts as an operator) and role facts
    read the principal's, so a ``Principal(..., role="member")`` given beside a turn that names no role
    would be a member to one gate and an operator to the next. The role is the weakest of the
    principal's, every principal of its chain and the turn's.
    """
    roles: list[str] = [principal.role, *(p.role for p in principal.chain)]
    if turn is not None and turn.caller_role:
        roles.append(turn.caller_role)
    role = weakest_role(*roles)
    if role != principal.role:
        principal = dataclasses.replace(principal, role=role)
    if role != "operator" and (turn is None or turn.caller_role != role):
        turn = dataclasses.replace(turn, caller_role=role) if turn is not None else TurnContext(caller_role=role)
    return principal, turn


def _role(role: str | None) -> Any:
    if role is None:
        return "operator"
    if role not in ("operator", "member", "guest"):
        return "guest"  # an unknown role claims nothing
    return role


class Identity:
    """The principal-facing half of :class:`~aleph.ScopedToolService`."""

    _cp: Chokepoint
    principal: Principal
    _scope: str | None

    def _role_refusal(self, entry: RegisteredTool) -> str | None:
        """Why this caller's role may not call ``entry`` (``None``: it may)."""
        required = entry.facts.requires_role
        if required is None or self.principal.has_role(required):
            return None
        return (
            f"`{entry.name}` needs the {required} role and this caller is a {self.principal.role}. "
            "Do not retry; ask the operator to run it."
        )

    def _who_asks(self, summary: str) -> str:
        """An approval summary that names the chain when the caller acts for others (the human sees for whom)."""
        if not self.principal.chain:
            return summary
        return f"{self.principal.agent} on behalf of {', '.join(self.principal.agents[1:])}: {summary}"

    def _grant_scope(self) -> str:
        """Whom a session grant or a remembered denial belongs to: this principal (chain included) in its session.

        Without a session it is this service alone, so the breaker and "refused again" still hold.
        """
        scope = self._scope
        if scope is None:
            if self.principal.session:
                scope = "principal\x1d" + self.principal.key()
            else:
                scope = f"service:{uuid.uuid4().hex}"
            self._scope = scope
        return scope

    def _bound_fingerprint(self, fingerprint: str) -> str:
        """A grant fingerprint bound to this principal's agents: a grant never covers another principal's call.

        Session grants are scoped by the whole principal already; this binds the "always" grants on file,
        which outlive sessions, to the agent and the chain it acts for.
        """
        agents = "\x1e".join(self.principal.agents)
        return hashlib.sha256(f"{fingerprint}\x1f{agents}".encode()).hexdigest()[:32]

    def approval_fingerprint(self, name: str, arguments: Mapping[str, Any]) -> str:
        """The fingerprint an approval request for ``name`` with ``arguments`` carries for this principal.

        A deferred answer (:class:`~aleph.DeferredApprovals`) is keyed by it: a framework resuming a
        suspended call answers exactly that call, for exactly this principal.
        """
        return self._approval_print(name, arguments, self._cp.registry.get(name) if isinstance(name, str) else None)

    def _approval_print(self, name: str, arguments: Mapping[str, Any], entry: RegisteredTool | None) -> str:
        """The fingerprint an approval of this call carries.

        Tool and canonical arguments, bound to the tool's definition (MCP tools), to its explicit nulls
        (untyped tools), to the exact secret-named values (under a key only Aleph holds) and to this
        principal's agents.
        """
        printed = nulls_bound(definition_bound(grant_fingerprint(name, arguments), entry), entry, arguments)
        return self._bound_fingerprint(secrets_bound(printed, arguments, self._cp.gate))

    def claim_session(self, key: str) -> bool:
        """Bind session ``key`` to this principal's owner if unused; whether it belongs to it now.

        An empty or over-long key belongs to nobody (False).
        """
        if not isinstance(key, str) or not key:
            return False
        try:
            return self._cp.owners.claim(key, self.principal.owner) == self.principal.owner
        except ValueError:
            return False

    def owns_session(self, key: str) -> bool:
        """Whether session ``key`` is bound to this principal's owner."""
        if not isinstance(key, str) or not key:
            return False
        return self._cp.owners.owner_of(key) == self.principal.owner

    async def delegate(
        self,
        agent: str,
        *,
        purpose: str,
        budget: Mapping[str, float] | None = None,
        turn: TurnContext | None = None,
    ) -> Self:
        """A service for ``agent`` acting for this principal (see :meth:`aleph.CallContext.delegate`)."""
        delegator = self._cp.delegator
        if delegator is None:
            raise PermissionDenied(
                "delegate", "delegation is not available here (this service was not built by a runtime)"
            )
        service: Self = await delegator(self, agent, purpose=purpose, budget=budget, turn=turn)
        return service
