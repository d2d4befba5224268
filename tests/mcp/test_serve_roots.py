"""`aleph serve` takes a legacy client's MCP roots as its workspace (its aleph.toml, its files)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters

pytestmark = pytest.mark.anyio

ALEPH = str(Path(sys.executable).parent / "aleph")


def params(cwd: Path) -> StdioServerParameters:
    env = {k: v for k, v in os.environ.items() if k.startswith(("XDG_", "ALEPH_", "HOME", "PATH"))}
    return StdioServerParameters(command=ALEPH, args=["serve"], cwd=str(cwd), env=env)


def roots_of(*paths: Path | str) -> Any:
    async def list_roots(context: Any) -> types.ListRootsResult:
        uris = [p if isinstance(p, str) else p.as_uri() for p in paths]
        return types.ListRootsResult(roots=[types.Root(uri=u) for u in uris])  # type: ignore[arg-type]

    return list_roots


@pytest.fixture
def project(tmp_path: Path) -> Path:
    project = tmp_path / "client-project"
    project.mkdir()
    (project / "aleph.toml").write_text('[policies.tool_permissions.overrides]\nclock_now = "deny"\n')
    return project


async def test_a_legacy_clients_root_is_the_workspace(workspace: Path, project: Path) -> None:
    callback = roots_of(project / "missing", project)  # the first does not exist: passed over
    async with Client(params(workspace), mode="legacy", list_roots_callback=callback) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        assert "text_stats" in names
        assert "clock_now" not in names  # the project's aleph.toml applies, not the launch directory's
        refused = await client.call_tool("clock_now", {})
        assert refused.is_error


async def test_without_roots_the_launch_directory_is_the_workspace(workspace: Path, project: Path) -> None:
    async with Client(params(project), mode="legacy") as client:
        assert "clock_now" not in [t.name for t in (await client.list_tools()).tools]
    async with Client(params(workspace), mode="legacy") as client:
        assert "clock_now" in [t.name for t in (await client.list_tools()).tools]


async def test_a_root_of_slash_is_ignored(workspace: Path, project: Path) -> None:
    (workspace / "aleph.toml").write_text('[policies.tool_permissions.overrides]\ntext_stats = "deny"\n')
    async with Client(params(workspace), mode="legacy", list_roots_callback=roots_of(Path("/"))) as client:
        names = [t.name for t in (await client.list_tools()).tools]
    assert "text_stats" not in names and "clock_now" in names  # still the launch directory's policy
