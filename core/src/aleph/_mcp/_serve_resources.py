"""Resources under ``aleph serve``: families offer them through ``aleph_mcp_resources``; reads pass the chokepoint.

Core knows no family: a plugin registers a URI scheme with two callables that act only through the
connection's scoped tool service (they call the family's own tools), so listing and reading a
resource are decided, approved and ledgered exactly like ``tools/call``, for the principal the
server binds. A source that fails while listing is logged and left out of that list; a read of an
unknown scheme or a missing resource is the protocol's "resource not found" error.
"""

from __future__ import annotations

import base64
import logging
import re
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp.shared.exceptions import MCPError

from aleph._errors import ToolError

if TYPE_CHECKING:
    from aleph._runtime import Aleph

__all__ = ["ResourceSources"]

log = logging.getLogger("aleph.serve")

RESOURCE_NOT_FOUND = -32002
"""The MCP error code for a resource that does not exist."""
MAX_RESOURCES = 10_000
"""Resources one ``resources/list`` returns at most."""
_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]{0,63}$")

Lister = Callable[[Any], Awaitable[list[dict[str, Any]]]]
Reader = Callable[[Any, str], Awaitable[tuple[bytes | str, str] | None]]


@dataclass(frozen=True, slots=True)
class _Source:
    list: Lister
    read: Reader


def _collect(rt: Aleph) -> dict[str, _Source]:
    sources: dict[str, _Source] = {}

    def register(scheme: str, list_resources: Lister, read_resource: Reader) -> None:
        if not isinstance(scheme, str) or not _SCHEME.match(scheme):
            raise ValueError(f"resource scheme {scheme!r} must match [a-z][a-z0-9+.-]*")
        if not callable(list_resources) or not callable(read_resource):
            raise ValueError("register(scheme, list_resources, read_resource) needs two async callables")
        if scheme in sources:
            raise ValueError(f"resource scheme {scheme!r} is registered twice")
        sources[scheme] = _Source(list_resources, read_resource)

    rt.plugins.call_each("aleph_mcp_resources", register=register, config=rt.config)
    return sources


class ResourceSources:
    """The resource sources of each runtime a server serves (collected once per runtime)."""

    def __init__(self) -> None:
        self._by_runtime: weakref.WeakKeyDictionary[Any, dict[str, _Source]] = weakref.WeakKeyDictionary()

    def of(self, rt: Aleph) -> dict[str, _Source]:
        """Scheme → source for ``rt``."""
        found = self._by_runtime.get(rt)
        if found is None:
            found = self._by_runtime[rt] = _collect(rt)
        return found

    async def list(self, rt: Aleph, service: Any) -> types.ListResourcesResult:
        """Every source's resources for the connection's principal."""
        out: list[types.Resource] = []
        for scheme, source in self.of(rt).items():
            try:
                items = await source.list(service)
            except ToolError as exc:
                log.info("resources of %s:// left out: %s", scheme, exc)
                continue
            for item in items[: MAX_RESOURCES - len(out)]:
                uri = str(item["uri"])
                if not uri.startswith(f"{scheme}://"):
                    log.warning("resource %r is not under its source's scheme %s://; left out", uri, scheme)
                    continue
                out.append(
                    types.Resource(
                        uri=uri,
                        name=str(item.get("name") or uri),
                        mime_type=item.get("mime_type"),
                        size=item.get("size"),
                        description=item.get("description"),
                    )
                )
        return types.ListResourcesResult(resources=out)

    async def read(self, rt: Aleph, service: Any, uri: str) -> types.ReadResourceResult:
        """One resource's contents; "resource not found" for an unknown scheme or a missing resource."""
        scheme = uri.split("://", 1)[0] if "://" in uri else ""
        source = self.of(rt).get(scheme)
        try:
            found = await source.read(service, uri) if source is not None else None
        except ToolError as exc:
            raise MCPError(code=-32603, message=str(exc)) from None
        if found is None:
            raise MCPError(code=RESOURCE_NOT_FOUND, message=f"resource not found: {uri}")
        data, mime_type = found
        if isinstance(data, str):
            content: Any = types.TextResourceContents(uri=uri, mime_type=mime_type, text=data)
        else:
            blob = base64.b64encode(data).decode("ascii")
            content = types.BlobResourceContents(uri=uri, mime_type=mime_type, blob=blob)
        return types.ReadResourceResult(contents=[content])
