"""``tool_usage`` lists the tools the caller could call, never one its channel or its chain hides.

A denied tool is hidden (absent from ``list``); a report that names installed tools must build its list
for the whole principal (channel layer, delegation chain), not for the bare agent.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import aleph

from .conftest import make_runtime

pytestmark = pytest.mark.anyio

HIDING = """
[channels.public.tool_permissions.overrides]
note_manage = "deny"
[agents.mallory.tool_permissions.overrides]
note_graph_query = "deny"
[agents.helper]
accepts_delegation_from = ["mallory"]
"""


def names(output: aleph.ToolOutput) -> set[str]:
    return {e["id"] for e in output.value["entries"]}


async def test_tool_usage_leaves_out_a_tool_the_callers_channel_denies(workspace: Path) -> None:
    async with make_runtime(workspace, HIDING) as rt:
        public = rt.tool_service(agent="alice", channel="public")
        private = rt.tool_service(agent="alice")
        assert "note_manage" not in names(await public.execute("tool_usage", {}))
        assert "note_manage" in names(await private.execute("tool_usage", {}))


async def test_tool_usage_leaves_out_a_tool_the_delegating_agent_is_denied(workspace: Path) -> None:
    async with make_runtime(workspace, HIDING) as rt:
        helper_for_mallory = rt.tool_service(principal=aleph.Principal("helper", chain=(aleph.Principal("mallory"),)))
        assert "note_graph_query" not in {d.name for d in await helper_for_mallory.list()}
        assert "note_graph_query" not in names(await helper_for_mallory.execute("tool_usage", {}))
        assert "note_graph_query" in names(await rt.tool_service(agent="helper").execute("tool_usage", {}))
