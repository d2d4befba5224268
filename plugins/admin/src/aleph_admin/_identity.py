r"""``agent_identity``: an agent's Ed25519 signing key in the ledger's keystore, and signed identity cards.

A card is canonical JSON (sorted keys, no spaces) of ``type``, ``agent``, ``public_key`` (hex),
``fingerprint`` (hex of the first 16 bytes of the key's SHA-256, as the ledger names keys),
``policy_digest`` (SHA-256 of the agent's layers in force, canonical JSON), ``created_by`` and
``issued_at``; ``signature`` is the Ed25519 signature of ``aleph-identity-card/1\n`` + that JSON.
:func:`verify_card` needs nothing but the card, so another Aleph (or ``python -m aleph_admin verify-card``)
can check it.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping
from typing import Any, Literal

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from pydantic import Field

import aleph
from aleph import AlephTool, ToolArgs, ToolFacts
from aleph_admin._state import AdminState, caller, missing_agent

__all__ = ["AgentIdentity", "card_message", "policy_digest", "verify_card"]

CARD_TYPE = "aleph-identity-card/1"
_CARD_FIELDS = ("type", "agent", "public_key", "fingerprint", "policy_digest", "created_by", "issued_at")


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def card_message(card: Mapping[str, Any]) -> bytes:
    """The bytes a card's signature covers."""
    return CARD_TYPE.encode() + b"\n" + _canonical({k: card.get(k) for k in _CARD_FIELDS})


def policy_digest(config: aleph.AlephConfig, agent: str) -> str:
    """SHA-256 of the layers that judge ``agent``: global, its own and every agent it is bounded by."""
    layers: dict[str, Any] = {"global": config.policies.model_dump(mode="json")}
    pending, seen = [agent], set()
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        settings = config.agents.get(name)
        layers[f"agent:{name}"] = settings.model_dump(mode="json") if settings is not None else None
        pending.extend(settings.bounded_by if settings is not None else ())
    return hashlib.sha256(_canonical(layers)).hexdigest()


def verify_card(card: Mapping[str, Any]) -> tuple[bool, str]:
    """Whether ``card`` is well formed and signed by the key it names; (ok, why)."""
    if card.get("type") != CARD_TYPE:
        return False, f"not an {CARD_TYPE} card"
    try:
        public = bytes.fromhex(str(card.get("public_key", "")))
        signature = bytes.fromhex(str(card.get("signature", "")))
    except ValueError:
        return False, "public_key or signature is not hex"
    if len(public) != 32:
        return False, "public_key is not a 32-byte Ed25519 key"
    if hashlib.sha256(public).digest()[:16].hex() != card.get("fingerprint"):
        return False, "fingerprint does not match public_key"
    try:
        Ed25519PublicKey.from_public_bytes(public).verify(signature, card_message(card))
    except InvalidSignature:
        return False, "the signature does not match the card (edited, or signed by another key)"
    return True, f"signed by {card.get('agent')!r}'s key {card.get('fingerprint')}"


class IdentityArgs(ToolArgs):
    action: Literal["show", "rotate", "revoke", "verify", "export", "verify_card"]
    """show the key; rotate it (old rows stay verifiable); revoke it; verify the agent's ledger with every key
    it had; export a signed identity card; verify_card checks a card (from this or another Aleph)."""
    agent: str | None = Field(default=None, max_length=64)
    """Yourself (default) or an agent you created."""
    card: str | None = Field(default=None, max_length=20_000)
    """The card to check, as the JSON text export returned (verify_card)."""


class AgentIdentity(AlephTool[IdentityArgs]):
    NAME = "agent_identity"
    DESCRIPTION = (
        "Your (or your agents') ledger signing identity: show, rotate, revoke, verify the ledger with old and "
        "new keys, export a signed identity card another Aleph can verify, or verify a card."
    )
    Args = IdentityArgs
    FACTS = ToolFacts(tags=("admin", "identity"))

    def __init__(self, state: AdminState) -> None:
        self.state = state

    async def call(self, args: IdentityArgs) -> dict[str, Any]:
        if args.action == "verify_card":
            try:
                card = json.loads(args.card or "")
            except json.JSONDecodeError as exc:
                raise aleph.ExecutionFailed(self.NAME, f"card: not JSON ({exc})") from None
            if not isinstance(card, dict):
                raise aleph.ExecutionFailed(self.NAME, "card: a JSON object, as export returned it")
            ok, why = verify_card(card)
            return {"valid": ok, "reason": why, "agent": card.get("agent")}
        who = caller(self.NAME)
        agent = args.agent or who.owner
        if agent != who.owner and not self.state.store.owned("agents", who.owner, agent):
            raise missing_agent(self.NAME, agent)
        keystore = self.state.keystore()
        ledger = self.state.context.ledger
        call = aleph.current_call()
        if args.action == "show":
            signer = keystore.signer(agent)
            keys = {fp: key.hex() for fp, key in keystore.public_keys(agent).items()}
            return {
                "agent": agent,
                "fingerprint": signer.fingerprint,
                "public_key": signer.public_key.hex(),
                "keys": keys,
                "revoked": keystore.is_revoked(agent),
            }
        if args.action == "rotate":
            old = keystore.signer(agent).fingerprint
            try:
                new = await ledger.rotate_key(agent) if ledger is not None else keystore.rotate(agent)
            except aleph.AlephError as exc:
                raise aleph.ExecutionFailed(self.NAME, str(exc)) from None
            if call is not None:
                call.annotate(identity=agent, old_key=old, new_key=new)
            return {"agent": agent, "old_fingerprint": old, "fingerprint": new}
        if args.action == "revoke":
            if ledger is not None:
                await ledger.revoke_key(agent)
            else:
                keystore.revoke(agent)
            if call is not None:
                call.annotate(identity=agent, revoked="yes")
            return {"agent": agent, "revoked": True}
        if args.action == "verify":
            if ledger is None:
                raise aleph.ExecutionFailed(
                    self.NAME, "the ledger is off ([ledger] enabled = false): nothing to verify"
                )
            await ledger.flush()
            report = ledger.verify(agent)
            return report.to_json()
        config = self.state.context.current_config()
        rows = self.state.store.owned("agents", who.owner, agent)
        signer = keystore.signer(agent)
        card: dict[str, Any] = {
            "type": CARD_TYPE,
            "agent": agent,
            "public_key": signer.public_key.hex(),
            "fingerprint": signer.fingerprint,
            "policy_digest": policy_digest(config, agent),
            "created_by": rows[0]["created_by"] if rows else "operator configuration",
            "issued_at": int(time.time()),
        }
        card["signature"] = signer.sign(card_message(card)).hex()
        return {"card": card}
