"""Listing an MCP server's tools, resources, templates and prompts: paginated, bounded, lenient.

A mixin of :class:`~aleph._mcp._server.ServerConnection`: a paginating server that never stops cannot
hang a listing, each list is capped, and one malformed tool does not hide the others.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import mcp_types as types
from mcp import Client
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from aleph._config import McpServerConfig

__all__ = ["Listing"]

log = logging.getLogger("aleph.mcp")

_MAX_PAGES = 50
"""A paginating server that never stops cannot hang a listing."""
_MAX_ITEMS = 2000
"""Per list: tools, resources, templates or prompts kept from one server."""


class _RawToolPage(BaseModel):
    """A ``tools/list`` page read without per-tool validation (each tool is validated on its own)."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)
    tools: list[dict[str, Any]] = Field(default_factory=list, max_length=_MAX_ITEMS * 2)
    next_cursor: str | None = Field(default=None, alias="nextCursor")


class Listing:
    """The listing half of a server connection (reads the connection's fields)."""

    client: Client | None
    capabilities: types.ServerCapabilities | None
    config: McpServerConfig
    tools: list[types.Tool]
    resources: list[types.Resource]
    templates: list[types.ResourceTemplate]
    prompts: list[types.Prompt]
    invalid_tools: list[dict[str, str]]
    warnings: list[str]

    async def _list_all(self, method: Callable[..., Any], attr: str) -> list[Any]:
        items: list[Any] = []
        cursor: str | None = None
        for _ in range(_MAX_PAGES):
            page = await method(cursor=cursor)
            items.extend(getattr(page, attr))
            cursor = page.next_cursor
            if not cursor or len(items) >= _MAX_ITEMS:
                break
        if len(items) > _MAX_ITEMS:
            self._warn(f"{attr}: only the first {_MAX_ITEMS} of more are used")
        return items[:_MAX_ITEMS]

    async def _relist(self, kinds: set[str]) -> None:
        """Re-list what the server advertises; never ask for a list it did not advertise."""
        client, caps = self.client, self.capabilities
        if client is None or caps is None:
            return
        if "tools" in kinds:
            if caps.tools is None:
                self.tools = []
            else:
                self.invalid_tools = []
                try:
                    self.tools = await self._list_all(client.list_tools, "tools")
                except ValidationError:
                    # One malformed tool must not hide the others: list raw, keep what validates.
                    self.tools = await self._list_tools_leniently(client)
        if "resources" in kinds:
            if caps.resources is not None:
                self.resources = await self._list_all(client.list_resources, "resources")
                self.templates = await self._list_all(client.list_resource_templates, "resource_templates")
            else:
                self.resources, self.templates = [], []
        if "prompts" in kinds:
            self.prompts = await self._list_all(client.list_prompts, "prompts") if caps.prompts is not None else []

    async def _list_tools_leniently(self, client: Client) -> list[types.Tool]:
        tools: list[types.Tool] = []
        self.invalid_tools = []
        cursor: str | None = None
        for _ in range(_MAX_PAGES):
            request = types.ListToolsRequest(params=types.PaginatedRequestParams(cursor=cursor))
            page = _RawToolPage.model_validate(await _send_unvalidated(client, request, self.config.timeout_seconds))
            for raw in page.tools[:_MAX_ITEMS]:
                try:
                    tools.append(types.Tool.model_validate(raw))
                except ValidationError as exc:
                    name = raw.get("name") if isinstance(raw.get("name"), str) else "(unnamed)"
                    reason = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:3])
                    self.invalid_tools.append(
                        {"tool": str(name)[:200], "reason": f"invalid definition: {reason}"[:300]}
                    )
            cursor = page.next_cursor
            if not cursor or len(tools) >= _MAX_ITEMS:
                break
        tools = tools[:_MAX_ITEMS]
        # Let the session learn the valid tools (output schemas, 2026 header maps) as a normal listing
        # would; otherwise its result validation re-lists and trips over the malformed ones again.
        absorb = getattr(client.session, "_absorb_tool_listing", None)
        if absorb is not None:
            absorb(types.ListToolsResult(tools=tools), complete=True)
        return tools

    def _warn(self, text: str) -> None:
        if text not in self.warnings:
            self.warnings.append(text)
            del self.warnings[:-50]


async def _send_unvalidated(client: Client, request: Any, timeout: float) -> Any:
    """Send ``request`` and return the raw result dict.

    ``ClientSession.send_request`` validates the whole result against the protocol schema, so one
    malformed tool would fail the listing of every tool. The session exposes no unvalidated path, so
    this uses its dispatcher the way ``send_request`` does (stamp, then send).
    """
    session: Any = client.session
    data = request.model_dump(by_alias=True, mode="json", exclude_none=True)
    opts: dict[str, Any] = {"timeout": timeout}
    session._stamp(data, opts)
    return await session._dispatcher.send_raw_request(data["method"], data.get("params"), opts)
