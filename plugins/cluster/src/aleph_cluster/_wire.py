"""Signed requests and replies between the center and a node.

A request is canonical JSON (sorted keys, no spaces) signed with the center's Ed25519 ledger key under a
domain tag; the node verifies it against the public key pinned in its ``[cluster_node] center_key``, that it
names this node, that it has not expired and that its id was not seen before (replay). A reply is signed by
the node's own ledger key over the request id, node name and result digest; the center verifies it against
the key it pinned when an operator joined the node. Bulk bytes (file chunks) travel beside the signed text
and are bound to it by their SHA-256.
"""

from __future__ import annotations

import collections
import hashlib
import json
import re
import secrets
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

import aleph

__all__ = [
    "REPLY_DOMAIN",
    "REQUEST_DOMAIN",
    "Replay",
    "Request",
    "WireError",
    "canonical",
    "digest",
    "new_request_id",
    "verify",
]

REQUEST_DOMAIN = b"aleph-cluster-request-v1\x00"
REPLY_DOMAIN = b"aleph-cluster-reply-v1\x00"
MAX_REQUEST_BYTES = 1_048_576
"""Signed request text larger than this is refused before it is parsed."""
MAX_CHAIN = 8
"""Most agents a request's principal may act for (core's delegation depth)."""
_AGENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", re.ASCII)
CLOCK_SKEW_MS = 30_000


class WireError(Exception):
    """A request or reply that must not be acted on (bad signature, wrong node, expired, replayed)."""


def canonical(value: Any) -> bytes:
    """Deterministic JSON bytes: sorted keys, no whitespace, UTF-8."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def digest(value: Any) -> str:
    """32 hex characters of SHA-256 over the canonical JSON of ``value`` (a ledger fingerprint)."""
    return hashlib.sha256(canonical(value)).hexdigest()[:32]


def new_request_id() -> str:
    """A fresh random request id (128 bits, hex)."""
    return secrets.token_hex(16)


def verify(public_key: bytes, signature: bytes, message: bytes) -> bool:
    """True when ``signature`` is a valid Ed25519 signature of ``message`` under ``public_key``."""
    try:
        Ed25519PublicKey.from_public_bytes(public_key).verify(signature, message)
    except (InvalidSignature, ValueError, TypeError):
        return False
    return True


def reply_message(request_id: str, node: str, result_digest: str) -> bytes:
    """The bytes a node signs for its reply to ``request_id``."""
    return REPLY_DOMAIN + canonical({"id": request_id, "node": node, "result": result_digest})


@dataclass(frozen=True, slots=True)
class Request:
    """A verified request, as the node acts on it."""

    id: str
    node: str
    kind: str
    principal: str
    channel: str
    body: dict[str, Any]
    expires_ms: int
    acting_for: tuple[str, ...] = ()
    """The agents ``principal`` acts for, nearest first (its delegation chain on the center)."""
    role: str = "member"
    """The weakest role of the principal's chain on the center (``member`` or ``guest`` on a node)."""

    @classmethod
    def make(
        cls,
        *,
        node: str,
        kind: str,
        principal: str,
        channel: str,
        body: Mapping[str, Any],
        ttl_seconds: float,
        request_id: str | None = None,
        acting_for: Sequence[str] = (),
        role: str = "member",
    ) -> tuple[Request, bytes]:
        """A new request and its canonical text (to be signed with :data:`REQUEST_DOMAIN` in front)."""
        now = int(time.time() * 1000)
        req = cls(
            id=request_id or new_request_id(),
            node=node,
            kind=kind,
            principal=principal,
            channel=channel,
            body=dict(body),
            expires_ms=now + int(ttl_seconds * 1000),
            acting_for=_chain(list(acting_for)),
            role=_role(role),
        )
        text = canonical(
            {
                "v": 1,
                "id": req.id,
                "node": node,
                "kind": kind,
                "principal": principal,
                "acting_for": list(req.acting_for),
                "role": req.role,
                "channel": channel,
                "body": req.body,
                "issued_ms": now,
                "expires_ms": req.expires_ms,
            }
        )
        return req, text

    def recorded_principal(self) -> str:
        """The principal as both ledgers record it: the agent, or with a chain its principal's canonical JSON."""
        if not self.acting_for:
            return self.principal
        return canonical(self.acting().to_json()).decode()

    def acting(self) -> aleph.Principal:
        """The principal a node runs this request as: the agent acting for its chain, with the chain's role."""
        chain = tuple(aleph.Principal(agent, None, None, self.role) for agent in self.acting_for)
        return aleph.Principal(self.principal, "cluster", f"cluster:{self.id}", self.role, chain)  # type: ignore[arg-type]

    @classmethod
    def open(cls, text: bytes, signature: bytes, *, center_key: bytes, node: str, now_ms: int | None = None) -> Request:
        """Verify and parse a signed request for ``node``; raises :class:`WireError` saying why not."""
        if not isinstance(text, bytes) or not isinstance(signature, bytes):
            raise WireError("request text and signature must be bytes")
        if len(text) > MAX_REQUEST_BYTES:
            raise WireError(f"request is {len(text)} bytes; the limit is {MAX_REQUEST_BYTES}")
        if not verify(center_key, signature, REQUEST_DOMAIN + text):
            raise WireError("request signature does not verify against this node's pinned center key")
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise WireError(f"request is not JSON: {exc}") from exc
        if not isinstance(data, dict) or data.get("v") != 1:
            raise WireError("request is not a version 1 object")
        now = int(time.time() * 1000) if now_ms is None else now_ms
        if data.get("node") != node:
            raise WireError(f"request is for node {data.get('node')!r}, not {node!r}")
        expires = data.get("expires_ms")
        issued = data.get("issued_ms")
        if not isinstance(expires, int) or not isinstance(issued, int) or expires < now:
            raise WireError("request expired")
        if issued > now + CLOCK_SKEW_MS:
            raise WireError("request was issued in the future (clock skew over 30 s)")
        fields = ("id", "kind", "principal", "channel")
        if not all(isinstance(data.get(f), str) and data.get(f) for f in fields[:3]):
            raise WireError("request lacks id, kind or principal")
        body = data.get("body")
        if not isinstance(body, dict):
            raise WireError("request body must be an object")
        return cls(
            id=data["id"],
            node=node,
            kind=data["kind"],
            principal=data["principal"],
            channel=str(data.get("channel") or ""),
            body=body,
            expires_ms=expires,
            acting_for=_chain(data.get("acting_for", [])),
            role=_role(data.get("role", "member")),
        )


def _chain(value: Any) -> tuple[str, ...]:
    """The agents a request's principal acts for; anything but a short list of agent names is refused."""
    if not isinstance(value, list) or len(value) > MAX_CHAIN:
        raise WireError(f"request acting_for must be a list of at most {MAX_CHAIN} agent names")
    if not all(isinstance(a, str) and _AGENT.fullmatch(a) for a in value):
        raise WireError("request acting_for holds something that is not an agent name")
    return tuple(value)


def _role(value: Any) -> str:
    """A request's role: ``guest`` or ``member`` (a node never takes an operator's call)."""
    if value not in ("operator", "member", "guest"):
        raise WireError(f"request role {value!r} is not operator, member or guest")
    return "guest" if value == "guest" else "member"


class Replay:
    """Request ids seen and not yet expired: a second delivery of the same signed request is refused."""

    def __init__(self, limit: int = 100_000) -> None:
        self._seen: collections.OrderedDict[str, int] = collections.OrderedDict()
        self._limit = limit

    def admit(self, request: Request, now_ms: int | None = None) -> None:
        """Remember ``request``; raises :class:`WireError` when its id was seen before."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        while self._seen:
            oldest, expires = next(iter(self._seen.items()))
            if expires >= now:
                break
            del self._seen[oldest]
        if request.id in self._seen:
            raise WireError(f"request {request.id} was already delivered (replay refused)")
        if len(self._seen) >= self._limit:  # forgetting an unexpired id would let it be replayed
            raise WireError(f"more than {self._limit} unexpired requests; try again when some expire")
        self._seen[request.id] = request.expires_ms
