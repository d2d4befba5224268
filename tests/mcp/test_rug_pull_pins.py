"""A tool a server adds after it was first listed is re-gated, even when that first listing offered none.

Trust on first use pins what a server offered when it was first seen. A server that first offered nothing
(or nothing its ``tool_filter`` lets through) was not remembered as seen, so a tool it added later counted as
"first seen" and was trusted silently: the classic rug pull of a server that looks harmless, then grows.
The servers are real ``MCPServer`` objects connected in-process; the tests add tools by calling the server
directly (as its own trigger), never through Aleph's registry.
"""

from __future__ import annotations

import pytest
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp_types import CallToolResult

from aleph import ToolRegistry
from aleph._config import McpServerConfig

from .conftest import MakeManager, wait_until

pytestmark = pytest.mark.anyio

INPROC = McpServerConfig(command="in-process", tool_filter=["extra_*"])


def growing_server() -> MCPServer:
    srv = MCPServer("growing")
    count = {"n": 0}

    @srv.tool()
    async def grow(ctx: Context) -> str:
        """Add one more tool."""
        count["n"] += 1
        n = count["n"]
        srv.add_tool(lambda: f"extra {n}", name=f"extra_{n}", description=f"Extra tool {n}.")
        await ctx.notify_tools_changed()
        await ctx.session.send_tool_list_changed()
        return f"added extra_{n}"

    return srv


async def grow(manager: object, registry: ToolRegistry, name: str) -> None:
    conn = manager.server("g")  # type: ignore[attr-defined]
    result = await conn.client.call_tool("grow", {})
    assert isinstance(result, CallToolResult) and not result.is_error
    await wait_until(registry, lambda: registry.get(name) is not None)


async def test_a_tool_added_to_a_server_first_seen_without_tools_asks_until_trusted(make_manager: MakeManager) -> None:
    manager = await make_manager({"g": INPROC}, inprocess={"g": growing_server()})
    registry = manager.registry
    assert [] == [n for n in registry.names() if n.startswith("g__")]  # nothing passed the filter at first
    await grow(manager, registry, "g__extra_1")
    entry = registry.get("g__extra_1")
    assert entry is not None and entry.facts.requires_approval and "definition_changed" in entry.facts.tags
    assert ["extra_1"] == manager.servers()[0].changed_tools
    assert ["extra_1"] == manager.trust("g", "extra_1")
    assert not registry.get("g__extra_1").facts.requires_approval  # type: ignore[union-attr]


async def test_tools_a_server_offers_on_a_later_start_after_an_empty_first_one_ask(
    make_manager: MakeManager,
) -> None:
    first = await make_manager({"g": INPROC}, inprocess={"g": growing_server()})
    await first.aclose()
    # The next start sees a server that now offers a tool through the filter from its first listing on.
    server = growing_server()
    server.add_tool(lambda: "surprise", name="extra_0", description="Appeared later.")
    registry = (await make_manager({"g": INPROC}, inprocess={"g": server})).registry
    entry = registry.get("g__extra_0")
    assert entry is not None and entry.facts.requires_approval


async def test_a_server_first_seen_with_tools_still_trusts_them_on_first_use(make_manager: MakeManager) -> None:
    server = growing_server()
    server.add_tool(lambda: "hello", name="extra_0", description="There from the start.")
    manager = await make_manager({"g": INPROC}, inprocess={"g": server})
    registry = manager.registry
    entry = registry.get("g__extra_0")
    assert entry is not None and not entry.facts.requires_approval
    await grow(manager, registry, "g__extra_1")
    assert registry.get("g__extra_1").facts.requires_approval  # type: ignore[union-attr]
