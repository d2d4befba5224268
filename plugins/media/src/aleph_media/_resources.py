"""Artifacts as MCP resources under ``aleph serve`` (core's ``aleph_mcp_resources`` hook).

Listing calls ``artifact_list`` and reading calls ``artifact_read`` through the connection's scoped
tool service, so the served principal's permissions, approvals and the ledger decide both, and the
owner filter of the store applies (a foreign artifact is "resource not found"). Only after that
call allowed the read are the bytes taken from the content-addressed blob, checked against their
digest, and handed to the client.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from aleph import ExecutionFailed
from aleph_media._artifacts import blob_path, check_id
from aleph_media._base import in_thread

__all__ = ["SCHEME", "ArtifactResources"]

SCHEME = "aleph-artifact"


class ArtifactResources:
    """The ``aleph-artifact://`` resource source of one runtime's data directory."""

    def __init__(self, root: Path, max_bytes: int) -> None:
        self.root = root
        self.max_bytes = max_bytes

    async def list(self, service: Any) -> list[dict[str, Any]]:
        """The served principal's artifacts of the current session."""
        out = json.loads((await service.execute("artifact_list", {})).text)
        return [
            {
                "uri": a["uri"],
                "name": a["name"],
                "mime_type": a["media_type"],
                "size": a["size"],
                "description": f"published by {a['published_by']} at {a['published_at']} from {a['source_path']}",
            }
            for a in out["artifacts"]
        ]

    async def read(self, service: Any, uri: str) -> tuple[bytes, str] | None:
        """The artifact's bytes and media type; None when the principal has no such artifact."""
        try:
            sha256 = check_id(uri)
        except ValueError:
            return None
        try:
            out = json.loads((await service.execute("artifact_read", {"id": sha256})).text)
        except ExecutionFailed as exc:
            if "not found" in exc.cause:
                return None
            raise
        artifact = out["artifact"]
        if artifact["size"] > self.max_bytes:
            raise ExecutionFailed(
                "artifact_read",
                f"artifact {sha256} is {artifact['size']:,} bytes, more than the {self.max_bytes:,} bytes served "
                "as a resource ([media] max_resource_bytes)",
            )
        data = await in_thread(blob_path(self.root, sha256).read_bytes)
        if hashlib.sha256(data).hexdigest() != sha256:
            raise ExecutionFailed("artifact_read", f"artifact {sha256} is damaged on disk (its digest differs)")
        return data, str(artifact["media_type"])
