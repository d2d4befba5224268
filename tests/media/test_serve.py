"""Artifacts served by a real ``aleph serve`` (stdio) to a real ``mcp.Client`` as resources."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

pytestmark = pytest.mark.anyio

ALEPH = str(Path(sys.executable).parent / "aleph")
DATA = bytes(range(256)) * 40


def serve(workspace: Path, *extra: str) -> StdioServerParameters:
    env = {k: v for k, v in os.environ.items() if k.startswith(("XDG_", "ALEPH_", "HOME", "PATH"))}
    return StdioServerParameters(command=ALEPH, args=["serve", *extra], cwd=str(workspace), env=env)


def config(workspace: Path, extra: str = "") -> None:
    data = (workspace / ".aleph-data").as_posix()
    (workspace / "aleph.toml").write_text(f'[workspace]\ndata_dir = "{data}"\n{extra}')


async def publish(client: Client, path: str) -> dict[str, object]:
    result = await client.call_tool("artifact_publish", {"path": path})
    assert not result.is_error, result.content
    return json.loads(result.content[0].text)["artifact"]  # type: ignore[union-attr, no-any-return]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_published_artifact_is_listed_and_read_as_a_resource(workspace: Path, mode: str) -> None:
    config(workspace)
    (workspace / "data.bin").write_bytes(DATA)
    async with Client(serve(workspace), mode=mode) as client:
        assert client.server_capabilities.resources is not None
        artifact = await publish(client, "data.bin")
        uri = f"aleph-artifact://sha256/{hashlib.sha256(DATA).hexdigest()}"
        assert artifact["uri"] == uri
        listed = (await client.list_resources()).resources
        assert [(str(r.uri), r.name, r.size) for r in listed] == [(uri, "data.bin", len(DATA))]
        (content,) = (await client.read_resource(uri)).contents
        assert base64.b64decode(content.blob) == DATA  # type: ignore[union-attr]
        assert content.mime_type == "application/octet-stream"
        with pytest.raises(MCPError, match="resource not found"):
            await client.read_resource("aleph-artifact://sha256/" + "0" * 64)
        with pytest.raises(MCPError, match="resource not found"):
            await client.read_resource("other-scheme://x")


async def test_another_principal_cannot_read_or_see_the_artifact(workspace: Path) -> None:
    config(workspace)
    (workspace / "data.bin").write_bytes(DATA)
    async with Client(serve(workspace), mode="legacy") as owner:
        uri = str((await publish(owner, "data.bin"))["uri"])
    async with Client(serve(workspace, "--agent", "bob"), mode="legacy") as bob:
        assert (await bob.list_resources()).resources == []
        with pytest.raises(MCPError, match="resource not found"):
            await bob.read_resource(uri)


async def test_a_deny_rule_on_artifact_read_refuses_the_resource_read(workspace: Path) -> None:
    config(workspace, '[policies.tool_permissions.overrides]\nartifact_read = "deny"\n')
    (workspace / "data.bin").write_bytes(DATA)
    async with Client(serve(workspace), mode="legacy") as client:
        uri = str((await publish(client, "data.bin"))["uri"])
        assert [str(r.uri) for r in (await client.list_resources()).resources] == [uri]
        with pytest.raises(MCPError, match="artifact_read"):
            await client.read_resource(uri)
