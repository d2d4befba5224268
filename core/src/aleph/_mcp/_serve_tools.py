"""The tools ``aleph serve`` lists, built once for each listing the chokepoint hands out.

A listing is the caller's tools as MCP ``Tool`` objects; building them costs about 50 µs a tool (7 ms at
140 tools). The chokepoint caches the definitions it lists (per principal, policy and registry
generation) and hands out the same definition objects while nothing changed, so the built listing is kept
for as long as those objects come back, and rebuilt as soon as any differs: a new tool, a changed policy,
another principal.

The 2026-07-28 HTTP era also checks each ``tools/call``'s ``Mcp-Param-*`` headers against the called tool's
input schema before dispatch. Without a lookup the SDK runs the whole ``tools/list`` handler, and
serialises its answer, before every call; :meth:`ServedTools.schema` answers from the same kept listing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import mcp_types as types

from aleph._contract._types import ToolDefinition

__all__ = ["ServedTools", "mcp_tool"]


def mcp_tool(defn: ToolDefinition) -> types.Tool:
    """``defn`` as an MCP tool (its facts as annotations)."""
    tags = defn.facts.tags
    return types.Tool(
        name=defn.name,
        description=defn.description,
        input_schema=defn.input_schema,
        annotations=types.ToolAnnotations(
            idempotent_hint=defn.facts.idempotent,
            destructive_hint="destructive" in tags or not defn.facts.idempotent,
        ),
    )


class ServedTools:
    """The last listing built, kept while the chokepoint hands out the same definitions."""

    def __init__(self) -> None:
        self._defs: tuple[ToolDefinition, ...] = ()
        self._listing: types.ListToolsResult | None = None
        self._schemas: dict[str, Mapping[str, Any]] | None = None

    def _same(self, defs: Sequence[ToolDefinition]) -> bool:
        kept = self._defs
        return len(kept) == len(defs) and all(a is b for a, b in zip(kept, defs, strict=True))

    def _keep(self, defs: Sequence[ToolDefinition]) -> None:
        if not self._same(defs):
            self._defs, self._listing, self._schemas = tuple(defs), None, None

    def listing(self, defs: Sequence[ToolDefinition]) -> types.ListToolsResult:
        """The ``tools/list`` answer for ``defs`` (the caller's definitions, as the chokepoint listed them)."""
        self._keep(defs)
        if self._listing is None:
            self._listing = types.ListToolsResult(tools=[mcp_tool(d) for d in self._defs])
        return self._listing

    def schema(self, defs: Sequence[ToolDefinition], name: str) -> Mapping[str, Any] | None:
        """The input schema of ``name`` among ``defs``; None for a tool the caller is not offered."""
        self._keep(defs)
        if self._schemas is None:
            self._schemas = {d.name: d.input_schema for d in self._defs}
        return self._schemas.get(name)
