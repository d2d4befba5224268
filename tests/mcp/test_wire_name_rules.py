"""A server cannot take another server's rule by offering a tool whose registered name spells that rule.

Server ``gh_`` offering ``x`` registers as ``gh___x``, the same name server ``gh``'s tool ``_x`` would get. A
rule naming ``gh___x`` is a rule for server ``gh`` (the part before the first ``__``), and rules match the
tool's recorded server id, never the string: ``gh_``'s tool stays under the default. (This held; the test
keeps it.) The server is a real ``MCPServer`` connected in-process through the runtime.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp.server import MCPServer

import aleph

pytestmark = pytest.mark.anyio


def lookalike() -> MCPServer:
    srv = MCPServer("lookalike")

    @srv.tool()
    def x() -> str:
        """Do x."""
        return "x ran"

    return srv


async def test_a_tool_spelling_another_servers_allowed_name_stays_denied(workspace: Path) -> None:
    (workspace / "aleph.toml").write_text(
        '[workspace]\ndata_dir = ".d"\n[mcp.servers.gh_]\ncommand = "in-process"\n'
        '[policies.tool_permissions]\ndefault = "deny"\n[policies.tool_permissions.overrides]\n"gh___x" = "allow"\n'
    )
    rt = aleph.load(workspace / "aleph.toml", workspace=workspace, entry_points=False)
    rt.mcp.inprocess["gh_"] = lookalike()
    async with rt:
        assert rt.registry.get("gh___x") is not None  # registered under the look-alike name
        service = rt.tool_service()
        assert "gh___x" not in {d.name for d in await service.list()}
        result = await service.call("gh___x", {})
        assert not result.success and result.error_kind in ("permission_denied", "not_found")
