"""For a tool that gets its arguments as sent, an explicit ``null`` is not the same call as a missing field.

A grant fingerprint leaves ``null`` fields out. A typed tool validates first, so a missing field and a
``null`` become the same value; an MCP server (or any untyped ``LoopTool``) gets the arguments as sent, and
may read ``"dry_run": null`` as "not a dry run" where a missing ``dry_run`` meant its default ``True``. A
session grant for the dry run then covered the real deploy. The MCP server is a real ``MCPServer``
connected in-process through the runtime; every call goes through ``rt.tool_service()``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp.server import MCPServer

import aleph
from aleph import ApprovalOutcome, LoopTool, ScriptedRequester

pytestmark = pytest.mark.anyio

effects: list[str] = []


def ops_server() -> MCPServer:
    srv = MCPServer("ops")

    @srv.tool()
    def deploy(target: str, dry_run: bool | None = True, options: dict[str, Any] | None = None) -> str:
        """Deploy a target (a dry run unless told otherwise)."""
        done = f"{target}: {'dry run' if dry_run else 'deployed'} {options or {}}"
        effects.append(done)
        return done

    return srv


async def raw_deploy(arguments: dict[str, Any]) -> str:
    done = f"{arguments['target']}: {'dry run' if arguments.get('dry_run', True) else 'deployed'}"
    effects.append(done)
    return done


RAW = LoopTool(
    "raw_deploy",
    "Deploy a target (untyped).",
    {"type": "object", "properties": {"target": {"type": "string"}, "dry_run": {"type": ["boolean", "null"]}}},
    raw_deploy,
)


@aleph.tool(name="typed_deploy", description="Deploy a target (typed).")
def typed_deploy(target: str, note: str | None = None) -> str:
    return f"{target} {note}"


@asynccontextmanager
async def runtime(workspace: Path) -> AsyncIterator[aleph.Aleph]:
    (workspace / "aleph.toml").write_text(
        '[workspace]\ndata_dir = ".d"\n[mcp.servers.ops]\ncommand = "in-process"\n'
        '[policies.tool_permissions.overrides]\n"ops__deploy" = "ask"\nraw_deploy = "ask"\ntyped_deploy = "ask"\n'
    )
    rt = aleph.load(workspace / "aleph.toml", workspace=workspace, entry_points=False)
    rt.mcp.inprocess["ops"] = ops_server()
    async with rt:
        rt.register(RAW)
        rt.register(typed_deploy)
        effects.clear()
        yield rt


async def granted_then(rt: aleph.Aleph, tool: str, granted: dict[str, Any], other: dict[str, Any]) -> bool:
    """Grant ``granted`` for the session; whether ``other`` then asks (True) or runs on that grant."""
    turn = aleph.TurnContext(session_key=f"nulls-{tool}")
    human = ScriptedRequester([ApprovalOutcome.APPROVED_FOR_SESSION])
    assert (await rt.tool_service(turn=turn, requester=human).call(tool, granted)).success
    nobody = ScriptedRequester()
    result = await rt.tool_service(turn=turn, requester=nobody).call(tool, other)
    assert result.success != bool(nobody.requests)
    return bool(nobody.requests)


@pytest.mark.parametrize(
    ("tool", "granted", "other"),
    [
        ("ops__deploy", {"target": "prod"}, {"target": "prod", "dry_run": None}),
        ("ops__deploy", {"target": "prod", "options": {}}, {"target": "prod", "options": {"force": None}}),
        ("raw_deploy", {"target": "prod"}, {"target": "prod", "dry_run": None}),
    ],
)
async def test_an_explicit_null_is_asked_about_anew_for_a_tool_that_gets_arguments_as_sent(
    workspace: Path, tool: str, granted: dict[str, Any], other: dict[str, Any]
) -> None:
    async with runtime(workspace) as rt:
        assert await granted_then(rt, tool, granted, other)
        assert not any("deployed" in e for e in effects)  # the real deploy never ran on the dry run's grant


async def test_for_a_typed_tool_a_null_and_a_missing_field_stay_one_call(workspace: Path) -> None:
    async with runtime(workspace) as rt:
        assert not await granted_then(rt, "typed_deploy", {"target": "prod"}, {"target": "prod", "note": None})
