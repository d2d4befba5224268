"""Resources a family offers through ``aleph_mcp_resources``, served by AlephMcpServer to a real mcp.Client."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

import aleph
from aleph._mcp.serve import AlephMcpServer
from aleph.testing import isolated_runtime

pytestmark = pytest.mark.anyio

NOTES = {"hello": "Hello, world.", "todo": "buy milk"}


class Notes:
    """A family with one read tool and a ``note://`` scheme read through it."""

    ALEPH_PLUGIN_NAME = "notes_fixture"

    def __init__(self) -> None:
        self.reads: list[str] = []

    @aleph.hookimpl
    def aleph_register_tools(self, register: aleph.ToolRegistrar, context: aleph.PluginContext) -> None:
        @aleph.tool(idempotent=True)
        def note_read(name: str) -> dict[str, Any]:
            """Read a note by name."""
            if name not in NOTES:
                raise aleph.ExecutionFailed("note_read", f"note {name!r} not found")
            self.reads.append(name)
            return {"text": NOTES[name]}

        register(note_read)

    @aleph.hookimpl
    def aleph_mcp_resources(self, register: Any, config: aleph.AlephConfig) -> None:
        async def list_notes(service: Any) -> list[dict[str, Any]]:
            return [{"uri": f"note://{n}", "name": n, "mime_type": "text/plain"} for n in NOTES] + [
                {"uri": "elsewhere://x", "name": "outside this source's scheme"}
            ]

        async def read_note(service: Any, uri: str) -> tuple[str, str] | None:
            name = uri.removeprefix("note://")
            if name not in NOTES:
                return None
            out = await service.execute("note_read", {"name": name})
            return json.loads(out.text)["text"], "text/plain"

        register("note", list_notes, read_note)


class BadScheme:
    ALEPH_PLUGIN_NAME = "bad_scheme_fixture"

    @aleph.hookimpl
    def aleph_mcp_resources(self, register: Any) -> None:
        async def nothing(*_: Any) -> None:
            return None

        register("Not A Scheme", nothing, nothing)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_family_s_resources_are_listed_and_read_through_its_tool(workspace: Path, mode: str) -> None:
    notes = Notes()
    async with isolated_runtime(workspace, notes) as rt:
        async with Client(AlephMcpServer(rt).server, mode=mode) as client:
            assert client.server_capabilities.resources is not None
            listed = (await client.list_resources()).resources
            assert [(str(r.uri), r.name, r.mime_type) for r in listed] == [
                ("note://hello", "hello", "text/plain"),
                ("note://todo", "todo", "text/plain"),
            ]
            (content,) = (await client.read_resource("note://todo")).contents
            assert content.text == "buy milk"  # type: ignore[union-attr]
            assert notes.reads == ["todo"]
            with pytest.raises(MCPError, match="resource not found: note://nope"):
                await client.read_resource("note://nope")
            with pytest.raises(MCPError, match="resource not found"):
                await client.read_resource("unknown://x")


async def test_a_deny_rule_on_the_family_s_tool_refuses_the_read(workspace: Path) -> None:
    notes = Notes()
    deny = '[policies.tool_permissions.overrides]\nnote_read = "deny"\n'
    async with isolated_runtime(workspace, notes, config_toml=deny) as rt:
        async with Client(AlephMcpServer(rt).server, mode="legacy") as client:
            with pytest.raises(MCPError, match="note_read"):
                await client.read_resource("note://hello")
    assert notes.reads == []


async def test_no_resources_capability_without_a_family_offering_some(workspace: Path) -> None:
    async with isolated_runtime(workspace) as rt:
        async with Client(AlephMcpServer(rt).server, mode="legacy") as client:
            assert client.server_capabilities.resources is None


async def test_a_malformed_scheme_is_refused_at_registration(workspace: Path) -> None:
    async with isolated_runtime(workspace, BadScheme()) as rt:
        with pytest.raises(ValueError, match="resource scheme 'Not A Scheme' must match"):
            AlephMcpServer(rt)
