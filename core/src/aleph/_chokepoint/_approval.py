"""Human approval: what a requester is asked, what it may answer, and the requester protocol."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol, runtime_checkable

from aleph._turn import TurnContext

__all__ = [
    "ApprovalDecision",
    "ApprovalOutcome",
    "ApprovalRequest",
    "ApprovalRequester",
    "ApprovalResponse",
]


class ApprovalOutcome(StrEnum):
    """A requester's answer."""

    APPROVED = "approved"
    """Allow this one call."""
    APPROVED_FOR_SESSION = "approved_for_session"
    """Allow this exact call (tool + canonical arguments) for the rest of the session."""
    APPROVED_ALWAYS = "approved_always"
    """Allow this exact call from now on (only when the request offers it)."""
    DENIED = "denied"
    """A human refused."""
    TIMEOUT = "timeout"
    """Nobody answered in time; not a refusal."""
    UNAVAILABLE = "unavailable"
    """Nobody could be asked; not a refusal."""

    @property
    def is_approved(self) -> bool:
        """True for the three approving outcomes."""
        return self in (ApprovalOutcome.APPROVED, ApprovalOutcome.APPROVED_FOR_SESSION, ApprovalOutcome.APPROVED_ALWAYS)


class ApprovalDecision(StrEnum):
    """A choice a prompt may offer."""

    ALLOW_ONCE = "allow_once"
    ALLOW_SESSION = "allow_session"
    ALLOW_ALWAYS = "allow_always"
    DENY = "deny"


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """What a human is shown. ``summary`` and ``arguments`` are already redacted and escaped."""

    tool_name: str
    summary: str
    reason: str
    rule_id: str
    allowed_decisions: tuple[ApprovalDecision, ...]
    fingerprint: str
    arguments: dict[str, Any] = field(default_factory=dict)
    turn: TurnContext | None = None


@dataclass(frozen=True, slots=True)
class ApprovalResponse:
    """The requester's answer, with the human's reason when they gave one."""

    outcome: ApprovalOutcome
    deny_reason: str | None = None
    once_id: str | None = None
    """A one-time id for an answer a caller may hand back more than once (a framework's saved run state):
    the gate records it as used by the call it approves, and an id already used never approves again.
    A session or standing grant the answer made stays in the gate and covers later calls as usual."""


@runtime_checkable
class ApprovalRequester(Protocol):
    """Something that can ask a human: a terminal, a chat card, an MCP client's elicitation."""

    async def request_approval(self, request: ApprovalRequest) -> ApprovalResponse:
        """Ask about ``request`` and return the answer. Never raise for "no answer": return TIMEOUT."""
        ...
