"""``artifact_publish``, ``artifact_list`` and ``artifact_unpublish`` over the :class:`ArtifactStore`."""

from __future__ import annotations

import base64
import mimetypes
import os
from typing import Any

from pydantic import Field

import aleph
from aleph import AlephTool, ExecutionFailed, ToolArgs, ToolFacts, ValidationFailed
from aleph_media._artifacts import ArtifactStore, check_id
from aleph_media._base import guard, in_thread
from aleph_media._config import MediaConfig
from aleph_media._confine import Workspace
from aleph_media._sniff import image_type

__all__ = ["ArtifactListTool", "ArtifactPublishTool", "ArtifactReadTool", "ArtifactUnpublishTool", "caller"]

DEFAULT_AGENT = "main"
INLINE_BYTES = 48 * 1024
"""Largest artifact ``artifact_read`` returns inline (base64 stays under the default output budget)."""
_ID_PATTERN = r"^(sha256:|aleph-artifact://sha256/)?[0-9a-fA-F]{64}$"


def caller() -> tuple[str, str]:
    """``(owner, session)`` of the running call: the principal the host bound, never a tool argument."""
    call = aleph.current_call()
    if call is None:
        return DEFAULT_AGENT, ""
    session = call.turn.session_key if call.turn is not None else ""
    return call.agent or DEFAULT_AGENT, session


def _media_type(head: bytes, name: str) -> str:
    found = image_type(head)
    if found:
        return found
    if head.startswith(b"%PDF-"):
        return "application/pdf"
    guessed, _ = mimetypes.guess_type(name, strict=False)
    return guessed or "application/octet-stream"


def _annotate(sha256: str) -> None:
    call = aleph.current_call()
    if call is not None:
        call.annotate(artifact=sha256)


class ArtifactPublishArgs(ToolArgs):
    path: str = Field(max_length=4096)
    """Workspace path of the file to publish."""
    name: str | None = Field(default=None, min_length=1, max_length=255)
    """Display name (default: the file's name)."""


class ArtifactPublishTool(AlephTool[ArtifactPublishArgs]):
    NAME = "artifact_publish"
    DESCRIPTION = (
        "Publish a workspace file as an immutable, content-addressed artifact (its id is the sha256 of its bytes) "
        "owned by you and listed for this session: returns id, uri, name, size, media type, who published it "
        "and when. Publishing the same bytes again returns the same artifact; later edits of the file do not "
        "change it."
    )
    Args = ArtifactPublishArgs
    FACTS = ToolFacts(idempotent=True, max_duration_ms=300_000, tags=("media", "artifacts", "write"))

    def __init__(self, ws: Workspace, config: MediaConfig, store: ArtifactStore) -> None:
        self.ws = ws
        self.config = config
        self.store = store

    async def call(self, args: ArtifactPublishArgs) -> dict[str, Any]:
        owner, session = caller()
        if args.name is not None and ("/" in args.name or "\x00" in args.name or not args.name.isprintable()):
            raise ValidationFailed(self.NAME, "name: must be a printable file name without '/'")
        result = await in_thread(self._publish, args, owner, session)
        _annotate(result["artifact"]["id"])
        return result

    def _publish(self, args: ArtifactPublishArgs, owner: str, session: str) -> dict[str, Any]:
        with guard(self.NAME), self.ws.open_file(args.path) as f:
            name = args.name or f.rel.rsplit("/", 1)[-1]
            media_type = _media_type(os.pread(f.fd, 64, 0), name)
            artifact, created = self.store.publish(
                owner,
                session,
                f.fd,
                name=name,
                media_type=media_type,
                source_path=f.rel,
                max_bytes=self.config.max_artifact_bytes,
            )
        return {"artifact": artifact.to_json(), "created": created}


class ArtifactListArgs(ToolArgs):
    all_sessions: bool = False
    """List your artifacts from every session, not only this one."""
    limit: int = Field(default=100, ge=1, le=100_000)
    """Most artifacts to return (newest first)."""


class ArtifactListTool(AlephTool[ArtifactListArgs]):
    NAME = "artifact_list"
    DESCRIPTION = (
        "List the artifacts you published in this session (or in all sessions with all_sessions=true), newest "
        "first: id, uri, name, size, media type, when. Read-only."
    )
    Args = ArtifactListArgs
    FACTS = ToolFacts(idempotent=True, concurrent_safe=True, tags=("media", "artifacts", "read"))

    def __init__(self, config: MediaConfig, store: ArtifactStore) -> None:
        self.config = config
        self.store = store

    async def call(self, args: ArtifactListArgs) -> dict[str, Any]:
        owner, session = caller()
        limit = min(args.limit, self.config.max_artifacts_listed)
        found = await in_thread(self.store.list, owner, None if args.all_sessions else session, limit)
        out: dict[str, Any] = {"artifacts": [a.to_json() for a in found]}
        if not args.all_sessions:
            out["session"] = session
        return out


class ArtifactUnpublishArgs(ToolArgs):
    id: str = Field(max_length=100, pattern=_ID_PATTERN)
    """The artifact's id (its sha256, also accepted as ``sha256:<hex>`` or its ``aleph-artifact://`` uri)."""


class ArtifactUnpublishTool(AlephTool[ArtifactUnpublishArgs]):
    NAME = "artifact_unpublish"
    DESCRIPTION = (
        "Unpublish one of your artifacts: it disappears from listings and can no longer be served. Needs a "
        "human's approval. The workspace file it came from is not touched."
    )
    Args = ArtifactUnpublishArgs
    FACTS = ToolFacts(requires_approval=True, tags=("media", "artifacts", "write"))

    def __init__(self, store: ArtifactStore) -> None:
        self.store = store

    async def call(self, args: ArtifactUnpublishArgs) -> dict[str, Any]:
        try:
            sha256 = check_id(args.id)
        except ValueError as exc:
            raise ValidationFailed(self.NAME, f"id: {exc}") from None
        owner, _ = caller()
        with guard(self.NAME):
            gone = await in_thread(self.store.unpublish, owner, sha256)
        if gone is None:
            raise ExecutionFailed(self.NAME, f"artifact {sha256} not found")
        _annotate(sha256)
        return {"unpublished": gone.to_json()}


class ArtifactReadArgs(ToolArgs):
    id: str = Field(max_length=100, pattern=_ID_PATTERN)
    """The artifact's id (its sha256, also accepted as ``sha256:<hex>`` or its ``aleph-artifact://`` uri)."""
    content: bool = False
    """Also return the bytes, base64-encoded (artifacts up to 48 KiB; larger ones are read as MCP resources)."""


class ArtifactReadTool(AlephTool[ArtifactReadArgs]):
    NAME = "artifact_read"
    DESCRIPTION = (
        "Look up one of your artifacts by id: name, size, media type, who published it and when; with "
        "content=true also its bytes (base64, up to 48 KiB). aleph serve reads artifacts for MCP clients "
        "through this tool. Read-only."
    )
    Args = ArtifactReadArgs
    FACTS = ToolFacts(idempotent=True, concurrent_safe=True, inline=True, tags=("media", "artifacts", "read"))

    def __init__(self, store: ArtifactStore) -> None:
        self.store = store

    async def call(self, args: ArtifactReadArgs) -> dict[str, Any]:
        sha256 = check_id(args.id)
        owner, _ = caller()
        found = self.store.get(owner, sha256)
        if found is None:
            raise ExecutionFailed(self.NAME, f"artifact {sha256} not found")
        out: dict[str, Any] = {"artifact": found.to_json()}
        if args.content:
            if found.size > INLINE_BYTES:
                out["note"] = (
                    f"{found.size:,} bytes is more than the {INLINE_BYTES:,} returned inline; MCP clients of "
                    f"aleph serve read it as the resource {found.uri}"
                )
            else:
                path = self.store.blob_path(owner, sha256)
                if path is None:
                    raise ExecutionFailed(self.NAME, f"artifact {sha256} not found")
                out["content_base64"] = base64.b64encode(await in_thread(path.read_bytes)).decode("ascii")
        return out
