"""Who is calling: the principal a host binds to a tool service.

A :class:`Principal` is the agent acting, the channel and session it acts in, its caller role, and the
chain of principals it acts for when another principal delegated work to it. The host binds it when it
builds a service (:meth:`aleph.Aleph.tool_service`); ``aleph serve`` binds one per connection and an
integration takes it from the framework's run context. No tool argument names or changes it: a tool
reads it with :func:`aleph.current_principal` and a family's store owns objects by
:attr:`Principal.owner`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["MAX_DELEGATION_DEPTH", "ROLES", "Principal", "Role", "role_rank", "weakest_role"]

Role = Literal["operator", "member", "guest"]
"""A caller role: ``operator`` (runs the install), ``member`` (a team member), ``guest`` (anyone else)."""

ROLES: tuple[Role, ...] = ("guest", "member", "operator")
"""Every role, weakest first."""

_RANK: dict[str, int] = {"guest": 0, "member": 1, "operator": 2}

MAX_DELEGATION_DEPTH = 8
"""How many principals a delegation chain may hold (the acting one excluded)."""

_ANONYMOUS = "default"


def role_rank(role: str) -> int:
    """0 for ``guest``, 1 for ``member``, 2 for ``operator``; an unknown role ranks as a guest."""
    return _RANK.get(role, 0)


def weakest_role(*roles: str) -> Role:
    """The least privileged of ``roles`` (an unknown one counts as ``guest``)."""
    weakest: Role = "operator"
    for role in roles:
        if role_rank(role) < role_rank(weakest):
            weakest = role if role in _RANK else "guest"  # type: ignore[assignment]
    return weakest


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is acting: bound by the host, never named by a tool argument.

    ``chain`` holds the principals this one acts for, nearest first: ``chain[0]`` delegated to it
    directly and ``chain[-1]`` started the whole chain (see :attr:`origin`). Equal principals are
    the same caller: decisions, grants and caches are keyed by the whole value, chain included.
    """

    agent: str = _ANONYMOUS
    """The agent acting (``default`` when the host named none)."""
    channel: str | None = None
    """The channel the request came from (a chat, a device, an MCP connection)."""
    session: str | None = None
    """The session it acts in; a session belongs to one agent (see :meth:`aleph.CallContext.claim_session`)."""
    role: Role = "operator"
    """The caller role. Delegation never raises it: a chain acts with the weakest role in it."""
    chain: tuple[Principal, ...] = ()
    """The principals this one acts for, nearest first; empty when it acts for itself."""
    user: str | None = None
    """The human on whose behalf the agent acts, when the host knows (recorded with approvals)."""

    def __post_init__(self) -> None:
        if not isinstance(self.agent, str) or not self.agent:
            raise ValueError("a principal's agent must be a non-empty string")
        if self.role not in _RANK:
            raise ValueError(f"unknown caller role {self.role!r}: use operator, member or guest")
        if len(self.chain) > MAX_DELEGATION_DEPTH:
            raise ValueError(f"a delegation chain holds at most {MAX_DELEGATION_DEPTH} principals")

    @property
    def owner(self) -> str:
        """The key a family's store owns objects by: the acting agent."""
        return self.agent

    @property
    def origin(self) -> Principal:
        """The principal that started the chain (this one when it acts for itself)."""
        return self.chain[-1] if self.chain else self

    @property
    def depth(self) -> int:
        """How many principals this one acts for."""
        return len(self.chain)

    @property
    def agents(self) -> tuple[str, ...]:
        """The acting agent, then every agent it acts for, nearest first."""
        return (self.agent, *(p.agent for p in self.chain))

    def is_operator(self) -> bool:
        """The caller has the operator role."""
        return self.role == "operator"

    def has_role(self, required: str) -> bool:
        """The caller's role is ``required`` or stronger (operator > member > guest)."""
        return _RANK[self.role] >= role_rank(required)

    def acting_as(self, agent: str, *, channel: str | None = None, session: str | None = None) -> Principal:
        """The principal ``agent`` acting for this one (one link deeper; the weakest role of the chain).

        Raises ``ValueError`` past :data:`MAX_DELEGATION_DEPTH`. Only the chokepoint's delegation door
        should call it: a principal made here has none of the checks :meth:`aleph.CallContext.delegate` makes.
        """
        chain = (self._link(), *self.chain)
        return Principal(
            agent=agent,
            channel=self.channel if channel is None else channel,
            session=session,
            role=self.role,
            chain=chain,
            user=self.user,
        )

    def _link(self) -> Principal:
        # The chain holds each principal without its own chain: the tuple already says who it acted for.
        return self if not self.chain else Principal(self.agent, self.channel, self.session, self.role, (), self.user)

    def key(self) -> str:
        """A stable text key for this principal and its chain (grant scopes, cache keys)."""
        parts = [f"{p.agent}\x1f{p.channel or ''}\x1f{p.session or ''}\x1f{p.role}" for p in (self, *self.chain)]
        return "\x1e".join(parts)

    def describe(self) -> str:
        """A short human form: ``admin for mallory (guest, channel chat, session s1)``."""
        who = self.agent if not self.chain else f"{self.agent} for {' for '.join(p.agent for p in self.chain)}"
        where: list[str] = [self.role]
        if self.channel:
            where.append(f"channel {self.channel}")
        if self.session:
            where.append(f"session {self.session}")
        if self.user:
            where.append(f"user {self.user}")
        return f"{who} ({', '.join(where)})"

    @classmethod
    def from_json(cls, data: object) -> Principal:
        """A principal from :meth:`to_json`'s form (a family that stores who scheduled something reads it back).

        Raises ``ValueError`` naming what is wrong; a chain's links are stored flat.
        """
        if not isinstance(data, dict):
            raise ValueError("a principal must be a JSON object")
        chain = data.get("chain") or []
        if not isinstance(chain, list):
            raise ValueError("a principal's chain must be a list")
        text = {k: data.get(k) for k in ("agent", "channel", "session", "user")}
        for key, value in text.items():
            if value is not None and not isinstance(value, str):
                raise ValueError(f"a principal's {key} must be a string")
        role = data.get("role", "operator")
        return cls(
            str(text["agent"] or ""),
            text["channel"],
            text["session"],
            role,  # checked by __post_init__
            tuple(
                cls.from_json({**link, "chain": []}) if isinstance(link, dict) else cls.from_json(link)
                for link in chain
            ),
            text["user"],
        )

    def to_json(self) -> dict[str, object]:
        """JSON form (ledger rows, events, ``aleph policy explain``)."""
        return {
            "agent": self.agent,
            "channel": self.channel,
            "session": self.session,
            "role": self.role,
            "user": self.user,
            "chain": [p.to_json() for p in self.chain],
        }
