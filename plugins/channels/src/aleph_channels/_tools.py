"""``channel_pairing`` and ``media_send``."""

from __future__ import annotations

import mimetypes
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

import aleph
from aleph import AlephTool, ExecutionFailed, PermissionDenied, ToolArgs, ToolFacts, ValidationFailed
from aleph_channels._adapter import ChannelUnavailable
from aleph_channels._hub import ChannelHub
from aleph_channels._pairing import normalise_code

__all__ = ["ChannelPairing", "MediaSend", "owner_of_call"]

HARD_MAX_MEDIA = 50 * 1024 * 1024


def owner_of_call() -> str:
    """The agent a call acts as: the owner of everything this family stores for it (one place)."""
    principal = aleph.current_principal()
    return principal.owner if principal is not None else "default"


def _is_operator() -> bool:
    principal = aleph.current_principal()
    return principal is None or principal.has_role("operator")


class PairingArgs(ToolArgs):
    action: Literal["list", "pending", "approve", "refuse", "revoke"] = "list"
    """``list`` your pairings, count ``pending`` codes, ``approve``/``refuse`` a code, ``revoke`` a pairing."""
    code: str | None = Field(default=None, max_length=20)
    """For approve/refuse: the code the sender was given (``ABCD-EFGH``)."""
    pairing_id: str | None = Field(default=None, max_length=40)
    """For revoke: the pairing's id (from ``list``)."""
    include_inactive: bool = False
    """For list: also revoked and lapsed pairings."""


class ChannelPairing(AlephTool[PairingArgs]):
    NAME = "channel_pairing"
    DESCRIPTION = (
        "Manage who may reach you through channels: list your pairings, count pending codes, approve or refuse "
        "a pairing code an unknown sender was given, revoke a pairing. Approving, refusing and revoking need the "
        "operator role."
    )
    Args = PairingArgs
    FACTS = ToolFacts(idempotent=False, concurrent_safe=False, tags=("channels",))

    def __init__(self, hub: ChannelHub) -> None:
        self._hub = hub

    async def call(self, args: PairingArgs) -> dict[str, Any]:
        store = self._hub.pairing
        owner = owner_of_call()
        now = time.time()
        if args.action == "list":
            pairings = store.list(owner, include_inactive=args.include_inactive)
            return {"pairings": [p.as_dict(now) for p in pairings], "count": len(pairings)}
        if args.action == "pending":
            return {"pending_codes": store.pending_count()}
        if not _is_operator():
            raise PermissionDenied(self.NAME, f"{args.action} needs the operator role")
        call = aleph.current_call()
        if args.action in ("approve", "refuse"):
            if not args.code or len(normalise_code(args.code)) != 8:
                raise ValidationFailed(self.NAME, "code: give the 8-character code the sender was given (ABCD-EFGH)")
            if args.action == "refuse":
                refused = store.refuse(args.code)
                if refused is None:
                    raise ExecutionFailed(self.NAME, "no pending pairing has that code (it may have expired)")
                return {"refused": True, "channel": refused[0], "sender": refused[1]}
            pairing = store.approve(owner, args.code, approved_by=owner)
            if pairing is None:
                raise ExecutionFailed(self.NAME, "no pending pairing has that code (it may have expired)")
            if call is not None:
                call.annotate(pairing_id=pairing.id, channel=pairing.adapter)
            return {"approved": True, "pairing": pairing.as_dict(now)}
        if not args.pairing_id:
            raise ValidationFailed(self.NAME, "pairing_id: required to revoke (see action list)")
        revoked = store.revoke(owner, args.pairing_id)
        if revoked is None:
            raise ExecutionFailed(self.NAME, f"no active pairing {args.pairing_id!r}")
        if call is not None:
            call.annotate(pairing_id=revoked.id, channel=revoked.adapter)
        return {"revoked": True, "pairing": revoked.as_dict(now)}


class MediaSendArgs(ToolArgs):
    path: str = Field(min_length=1, max_length=4096)
    """The file to send, relative to the workspace."""
    caption: str = Field(default="", max_length=2000)
    """Text sent with the file."""


class MediaSend(AlephTool[MediaSendArgs]):
    NAME = "media_send"
    DESCRIPTION = (
        "Send a file of the workspace to the conversation this request came from (the person you work for), "
        "with an optional caption. Each channel has its own size and type limits; IRC carries no files."
    )
    Args = MediaSendArgs
    FACTS = ToolFacts(
        sink=True, idempotent=False, concurrent_safe=True, max_duration_ms=120_000, tags=("channels", "media")
    )

    def __init__(self, hub: ChannelHub, workspace: Path, protected: list[Path]) -> None:
        self._hub = hub
        self._workspace = workspace
        self._protected = protected

    def _resolve(self, raw: str) -> Path:
        root = self._workspace.resolve()
        candidate = Path(raw)
        path = (candidate if candidate.is_absolute() else root / candidate).resolve()
        if path != root and root not in path.parents:
            raise PermissionDenied(self.NAME, f"{raw!r} is outside the workspace")
        for protected in self._protected:
            if path == protected or protected in path.parents:
                raise PermissionDenied(self.NAME, f"{raw!r} is one of Aleph's own files and is never sent")
        if not path.is_file():
            raise ExecutionFailed(self.NAME, f"no file {raw!r} in the workspace")
        return path

    async def call(self, args: MediaSendArgs) -> dict[str, Any]:
        call = aleph.current_call()
        channel = call.channel if call is not None else None
        turn = call.turn if call is not None else None
        if not channel or channel not in self._hub.adapters:
            raise ExecutionFailed(self.NAME, "this request came from no channel adapter, so there is nobody to send to")
        conversation = turn.conversation_id if turn is not None else ""
        if not conversation:
            raise ExecutionFailed(self.NAME, f"the request on channel {channel!r} names no conversation")
        path = self._resolve(args.path)
        size = path.stat().st_size
        media_type = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        adapter = self._hub.adapter(channel)
        why = adapter.limits.check(size, media_type) or (
            f"the file is {size:,} bytes; at most {HARD_MAX_MEDIA:,} are sent" if size > HARD_MAX_MEDIA else None
        )
        if why is not None:
            raise ValidationFailed(self.NAME, f"{args.path}: {why}")
        try:
            await self._hub.ensure_started(channel)
            await adapter.send_media(conversation, path, media_type, args.caption)
        except ChannelUnavailable as exc:
            raise ExecutionFailed(self.NAME, str(exc)) from None
        return {"sent": True, "channel": channel, "path": args.path, "bytes": size, "media_type": media_type}
