"""The per-call turn context, readable by tools through :func:`current_turn`."""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from aleph._chokepoint._budget import Budget

__all__ = ["TurnContext", "current_session", "current_turn"]


@dataclass(frozen=True, slots=True)
class TurnContext:
    """Under which conditions a call runs (session, run, flags, budget). Set by the chokepoint for each call.

    The host builds it; what it says about who is calling is bound into the service's
    :class:`~aleph.Principal` when the service is built, and a tool cannot change that.
    """

    session_key: str = ""
    """The conversation session; keys session grants and the event log."""
    run_id: str = ""
    """The agent run this call belongs to."""
    channel_id: str = ""
    """The channel (chat, device, MCP client) the request came from."""
    conversation_id: str = ""
    """The conversation inside that channel."""
    caller_role: str | None = None
    """``operator`` (or None), ``member`` or ``guest``: the host states it; it becomes :attr:`aleph.Principal.role`."""
    unattended: bool = False
    """No human is watching: approval prompts are never shown, gated calls are refused."""
    plan_mode: bool = False
    """The session is planning: only read-only tools run."""
    side_question: bool = False
    """A side question is being answered: nothing that mutates runs."""
    principal: str | None = None
    """The human user on whose behalf the agent acts, when known: it becomes :attr:`aleph.Principal.user`.

    Who is calling as a whole (agent, channel, session, role, chain) is :func:`aleph.current_principal`.
    """
    call_id: str | None = None
    """The model's tool-call id, when the agent loop passes one."""
    budget: Budget | None = None
    """A spend cap every call of this turn is charged against before it runs (see :class:`~aleph.Budget`)."""
    idempotency_key: str | None = None
    """Names this one mutating call (e.g. ``"<task>:<step>"``): a replay gets the recorded result, not a re-run."""
    refs: tuple[tuple[str, str], ...] = ()
    """References put on the ledger row of every call of this turn, e.g. ``(("team_id", t), ("task_id", k))``."""

    def is_channel_routable(self) -> bool:
        """Both a channel and a conversation id are known."""
        return bool(self.channel_id and self.conversation_id)

    def caller_is_operator(self) -> bool:
        """The caller is the server operator (role None or ``operator``)."""
        return self.caller_role in (None, "operator")

    def with_call_id(self, call_id: str | None) -> TurnContext:
        """The same turn for another tool call: every field equal but ``call_id``.

        Equal to ``dataclasses.replace(turn, call_id=call_id)`` at about a third of its cost: a framework
        integration makes one per tool call. The copy is written out field by field (a loop over the
        names costs half as much again); a test checks it names every field.
        """
        c = _new(TurnContext)
        _set(c, "session_key", self.session_key)
        _set(c, "run_id", self.run_id)
        _set(c, "channel_id", self.channel_id)
        _set(c, "conversation_id", self.conversation_id)
        _set(c, "caller_role", self.caller_role)
        _set(c, "unattended", self.unattended)
        _set(c, "plan_mode", self.plan_mode)
        _set(c, "side_question", self.side_question)
        _set(c, "principal", self.principal)
        _set(c, "budget", self.budget)
        _set(c, "idempotency_key", self.idempotency_key)
        _set(c, "refs", self.refs)
        _set(c, "call_id", call_id)
        return c


_new = object.__new__
_set = object.__setattr__


_TURN: ContextVar[TurnContext | None] = ContextVar("aleph_turn", default=None)


def current_turn() -> TurnContext | None:
    """The turn context of the tool call running in this task, or None outside a call."""
    return _TURN.get()


def current_session() -> str | None:
    """The session key of the running call, or None."""
    turn = _TURN.get()
    return turn.session_key or None if turn is not None else None
