"""MCP content as Aleph returns it: text blocks joined, binaries described or base64, everything capped."""

from __future__ import annotations

import base64
from typing import Any

import mcp_types as types

from aleph._mcp._hygiene import cap_text

__all__ = ["render_content", "resource_item"]


def _approx_b64_bytes(data: str) -> int:
    return len(data) * 3 // 4


def render_content(content: Any) -> str:
    """MCP content blocks as text: images and binaries are described, never inlined (R17.7)."""
    parts: list[str] = []
    for block in content or ():
        if isinstance(block, types.TextContent):
            parts.append(block.text)
        elif isinstance(block, types.ImageContent):
            parts.append(f"[Image: {block.mime_type} (~{_approx_b64_bytes(block.data)} bytes)]")
        elif isinstance(block, types.AudioContent):
            parts.append(f"[Audio: {block.mime_type} (~{_approx_b64_bytes(block.data)} bytes)]")
        elif isinstance(block, types.EmbeddedResource):
            res = block.resource
            text = getattr(res, "text", None)
            parts.append(text if isinstance(text, str) else f"[Resource: {res.uri}]")
        elif isinstance(block, types.ResourceLink):
            parts.append(f"[Resource: {block.uri}]")
        else:
            parts.append(f"[{type(block).__name__}]")
    return "\n".join(parts)


def resource_item(contents: Any) -> dict[str, Any]:
    """One resource content as ``{content, content_type, mime_type}`` (binary base64, capped)."""
    mime = getattr(contents, "mime_type", None)
    text = getattr(contents, "text", None)
    if isinstance(text, str):
        return {"content": cap_text(text), "content_type": "text", "mime_type": mime or "text/plain"}
    blob = getattr(contents, "blob", "") or ""
    kind = "image" if (mime or "").startswith("image/") else "binary"
    if len(blob) > 4_000_000:
        return {
            "content": "",
            "content_type": kind,
            "mime_type": mime,
            "error": f"content too large to return (~{_approx_b64_bytes(blob)} bytes)",
        }
    try:
        base64.b64decode(blob, validate=True)
    except ValueError:
        return {"content": "", "content_type": kind, "mime_type": mime, "error": "the server sent invalid base64"}
    return {"content": blob, "content_type": kind, "mime_type": mime}
