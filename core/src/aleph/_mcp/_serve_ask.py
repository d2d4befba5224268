"""Asking the MCP client's user for approval, on both protocol eras, over core's deferred approval.

A call that needs a human raises :class:`~aleph.ApprovalRequired` out of a service built with
:class:`~aleph.DeferredApprovals`; the question becomes a form elicitation and the answer resumes the
same call (the answer covers exactly that call's fingerprint):

- legacy (2025-11-25 and before): the server sends ``elicitation/create`` while the ``tools/call`` is
  open and waits (bounded) for the answer;
- 2026-07-28: ``tools/call`` answers ``input_required`` carrying the elicitation and a ``requestState``;
  the client asks its user and retries with the answer. The server keeps nothing between rounds: the
  state names the call's fingerprint, the session and principal it was asked for, the client it was
  asked of (a digest of the request's ``Authorization`` header), and a one-time nonce, and the SDK's
  :class:`~mcp.server.request_state.RequestStateBoundary` seals it (AES-256-GCM under a key kept in the
  data directory) bound to the tool, its arguments and an expiry, and refuses anything else that comes
  back. A nonce is honoured once, so an approved-once state cannot be replayed.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity

from aleph._atomic import create_atomic, write_atomic
from aleph._chokepoint._approval import ApprovalDecision, ApprovalOutcome, ApprovalRequest, ApprovalResponse

__all__ = [
    "APPROVAL_KEY",
    "STATE_TTL_S",
    "AskState",
    "ReplayGuard",
    "answer_from_elicitation",
    "approval_form",
    "digest",
    "elicit_request",
    "new_nonce",
    "offered_choices",
    "request_state_boundary",
]

APPROVAL_KEY = "aleph_approval"
"""The ``input_requests`` key of the approval question."""
STATE_TTL_S = 600.0
"""How long a 2026-07-28 approval question stays answerable."""
MAX_REPLAY_MEMORY = 4096

_CHOICES = {
    "approve_once": ApprovalOutcome.APPROVED,
    "approve_for_session": ApprovalOutcome.APPROVED_FOR_SESSION,
    "approve_always": ApprovalOutcome.APPROVED_ALWAYS,
    "deny": ApprovalOutcome.DENIED,
}
_OFFERED = {
    ApprovalDecision.ALLOW_ONCE: "approve_once",
    ApprovalDecision.ALLOW_SESSION: "approve_for_session",
    ApprovalDecision.ALLOW_ALWAYS: "approve_always",
    ApprovalDecision.DENY: "deny",
}


def _parse_key(text: str) -> bytes | None:
    try:
        key = bytes.fromhex(text.strip())
    except ValueError:
        return None
    return key if len(key) == 32 else None


def _key_file(data_dir: Path) -> bytes:
    """32 random bytes kept in ``<data_dir>/mcp/request-state.key`` (made once, mode 0600).

    Servers starting together on a new data directory race to make it: it is created atomically (the
    first complete file wins, the others read it), so nobody reads it empty. A malformed file (an
    older version could leave it empty) is replaced under a lock, so racing servers agree on one key.
    """
    path = data_dir / "mcp" / "request-state.key"
    try:
        key = _parse_key(path.read_text())
    except FileNotFoundError:
        create_atomic(path, secrets.token_bytes(32).hex())
        key = _parse_key(path.read_text())
    if key is not None:
        return key
    fd = os.open(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        key = _parse_key(path.read_text())
        if key is None:
            key = secrets.token_bytes(32)
            write_atomic(path, key.hex())
        return key
    finally:
        os.close(fd)


def request_state_boundary(data_dir: Path) -> RequestStateBoundary:
    """The SDK middleware that seals outgoing and verifies incoming ``requestState`` under the data-dir key."""
    security = RequestStateSecurity(keys=[_key_file(data_dir)], ttl=STATE_TTL_S)
    return RequestStateBoundary(security, default_audience="aleph")


@dataclass(frozen=True, slots=True)
class AskState:
    """What one 2026-07-28 round remembers through the client: the question it asked, for which call.

    The pending question is an approval (``fingerprint`` and ``offered``) or a question a tool asked
    through :meth:`aleph.CallContext.ask_human` (``question``, its digest). A call that asks more than
    once carries what earlier rounds settled: the approvals granted (``granted``: fingerprint and
    outcome) and the answers given (``answers``: question digest, outcome, content). The state is
    sealed (encrypted and authenticated), so the client can neither read nor change any of it.
    """

    fingerprint: str
    session: str
    nonce: str
    offered: tuple[str, ...]
    principal: str = ""
    """A digest of the principal (chain included) the question was asked for."""
    client: str = ""
    """A digest of what identifies the client on the wire (see :func:`client_binding`)."""
    question: str = ""
    granted: tuple[tuple[str, str], ...] = ()
    answers: tuple[tuple[str, str, Any], ...] = ()
    expires: float = 0.0
    """For a question: when (epoch seconds) its own timeout ends; an answer after that is no answer."""

    def dump(self) -> str:
        """The plaintext the boundary seals."""
        return json.dumps(
            {
                "v": 3,
                "fp": self.fingerprint,
                "session": self.session,
                "nonce": self.nonce,
                "offered": self.offered,
                "principal": self.principal,
                "client": self.client,
                "q": self.question,
                "granted": self.granted,
                "answers": self.answers,
                "exp": self.expires,
            },
            separators=(",", ":"),
        )

    @classmethod
    def load(cls, text: str | None) -> AskState | None:
        """Parse a state the boundary already verified as ours; None for no state or another shape."""
        if not text:
            return None
        try:
            data = json.loads(text)
            if data.get("v") != 3:
                return None
            return cls(
                str(data["fp"]),
                str(data["session"]),
                str(data["nonce"]),
                tuple(map(str, data["offered"])),
                str(data["principal"]),
                str(data["client"]),
                str(data["q"]),
                tuple((str(fp), str(outcome)) for fp, outcome in data["granted"]),
                tuple((str(q), str(outcome), content) for q, outcome, content in data["answers"]),
                float(data["exp"]),
            )
        except (ValueError, KeyError, TypeError, AttributeError):
            return None


class ReplayGuard:
    """Remembers the nonces of answered questions until they expire: each answer is used once."""

    def __init__(self) -> None:
        self._used: OrderedDict[str, float] = OrderedDict()

    def first_use(self, nonce: str, now: float | None = None) -> bool:
        """True the first time ``nonce`` is seen within the state's lifetime."""
        now = time.monotonic() if now is None else now
        while self._used and next(iter(self._used.values())) < now:
            self._used.popitem(last=False)
        if nonce in self._used:
            return False
        self._used[nonce] = now + STATE_TTL_S
        while len(self._used) > MAX_REPLAY_MEMORY:
            self._used.popitem(last=False)
        return True


def offered_choices(request: ApprovalRequest) -> list[str]:
    """The choices a prompt shows: the request's decisions, always with "deny"."""
    offered = [_OFFERED[d] for d in request.allowed_decisions if d in _OFFERED] or ["approve_once", "deny"]
    if "deny" not in offered:
        offered.append("deny")
    return offered


def approval_form(request: ApprovalRequest) -> tuple[str, dict[str, Any], list[str]]:
    """(message, requested JSON schema, offered choices) of the elicitation that asks about ``request``."""
    offered = offered_choices(request)
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "decision": {"type": "string", "enum": offered, "title": "Decision", "description": "Your answer."},
            "reason": {"type": "string", "title": "Reason", "description": "Why (optional)."},
        },
        "required": ["decision"],
    }
    message = f"Aleph asks: allow the tool {request.tool_name}?\n{request.summary}\nReason: {request.reason}"
    return message[:4000], schema, offered


def elicit_request(request: ApprovalRequest) -> tuple[types.ElicitRequest, list[str]]:
    """The embedded ``elicitation/create`` of a 2026-07-28 ``input_required`` result."""
    message, schema, offered = approval_form(request)
    return types.ElicitRequest(params=types.ElicitRequestFormParams(message=message, requested_schema=schema)), offered


def answer_from_elicitation(result: Any, offered: list[str] | tuple[str, ...]) -> ApprovalResponse:
    """Map an elicitation result (accept / decline / cancel, a choice, a reason) onto an approval answer."""
    action = getattr(result, "action", None)
    if action != "accept":
        why = f"the user chose {action}" if action in ("decline", "cancel") else "the answer was not understood"
        return ApprovalResponse(ApprovalOutcome.DENIED, deny_reason=why)
    content = getattr(result, "content", None) or {}
    choice = content.get("decision") if isinstance(content, dict) else None
    outcome = _CHOICES.get(choice) if isinstance(choice, str) and choice in offered else None
    if outcome is None:
        return ApprovalResponse(ApprovalOutcome.DENIED, deny_reason="the answer was not one of the offered choices")
    reason = content.get("reason")
    text = str(reason)[:500] if isinstance(reason, str) and reason.strip() else None
    return ApprovalResponse(outcome, deny_reason=text if not outcome.is_approved else None)


def digest(text: str) -> str:
    """A short SHA-256 digest of ``text`` (what a state keeps of a principal or a client binding)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def new_nonce() -> str:
    """A fresh one-time nonce for a question."""
    return secrets.token_urlsafe(16)
