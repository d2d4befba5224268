"""A rule that denies a whole MCP server also shuts its resources, templates and prompts.

``"secret__*" = "deny"`` denies every tool of the server ``secret``; the capability tools
(``mcp_list_resources``, ``mcp_read_resource``, ``mcp_list_resource_templates``, ``mcp_list_prompts``,
``mcp_get_prompt``) are core tools and passed that rule by, so a caller shut out of the server still
listed and read its resources (the very URI its denied template tool expands to) and got its prompts. Now
the denied server answers exactly like one that is not there, for that caller only. The servers are real
``MCPServer`` objects connected in-process through the runtime; calls go through ``rt.tool_service()``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from mcp.server import MCPServer

import aleph

pytestmark = pytest.mark.anyio


def notes_server(name: str) -> MCPServer:
    srv = MCPServer(name)

    @srv.resource("notes://readme")
    def readme() -> str:
        """The readme."""
        return f"readme of {name}"

    @srv.resource("notes://{owner}/{note_id}")
    def note(owner: str, note_id: str) -> str:
        """One note of one owner."""
        return f"note {note_id} of {owner} on {name}"

    @srv.prompt()
    def review(code: str) -> str:
        """Review some code."""
        return f"{name} reviews {code}"

    return srv


@asynccontextmanager
async def runtime(workspace: Path, rules: str) -> AsyncIterator[aleph.Aleph]:
    (workspace / "aleph.toml").write_text(
        '[mcp.servers.secret]\ncommand = "in-process"\n[mcp.servers.open]\ncommand = "in-process"\n' + rules
    )
    rt = aleph.load(workspace / "aleph.toml", workspace=workspace, entry_points=False)
    rt.mcp.inprocess.update(secret=notes_server("secret"), open=notes_server("open"))
    async with rt:
        yield rt


async def servers_seen(service: aleph.ScopedToolService) -> dict[str, set[str]]:
    resources = json.loads((await service.execute("mcp_list_resources", {})).text)["resources"]
    templates = json.loads((await service.execute("mcp_list_resource_templates", {})).text)["templates"]
    prompts = json.loads((await service.execute("mcp_list_prompts", {})).text)["prompts"]
    return {
        "resources": {r["server"] for r in resources},
        "templates": {t["server"] for t in templates},
        "prompts": {p["server"] for p in prompts},
    }


def call_input(tool: str, key: str, value: str) -> dict[str, object]:
    return {key: value, "arguments": {"code": "x"}} if tool == "mcp_get_prompt" else {key: value}


async def refusal(service: aleph.ScopedToolService, tool: str, key: str, value: str) -> str:
    result = await service.call(tool, call_input(tool, key, value))
    assert not result.success
    return (result.error or "").replace(value, "<id>")


DENIED = '[policies.tool_permissions.overrides]\n"secret__*" = "deny"\n'


async def test_a_denied_server_is_left_out_of_every_listing(workspace: Path) -> None:
    async with runtime(workspace, DENIED) as rt:
        seen = await servers_seen(rt.tool_service())
        assert {"resources": {"open"}, "templates": {"open"}, "prompts": {"open"}} == seen


@pytest.mark.parametrize(
    ("tool", "key", "denied", "missing"),
    [
        ("mcp_read_resource", "uri", "secret:notes://readme", "nosuch:notes://readme"),
        ("mcp_read_resource", "uri", "secret:notes://alice/1", "nosuch:notes://alice/1"),
        ("mcp_get_prompt", "name", "secret:review", "nosuch:review"),
    ],
)
async def test_a_denied_servers_resource_or_prompt_answers_like_a_missing_server(
    workspace: Path, tool: str, key: str, denied: str, missing: str
) -> None:
    async with runtime(workspace, DENIED) as rt:
        service = rt.tool_service()
        assert await refusal(service, tool, key, denied) == await refusal(service, tool, key, missing)
        allowed = denied.replace("secret:", "open:")
        result = await service.call(tool, call_input(tool, key, allowed))
        assert result.success and "open" in result.output
        # The typed template tool of the denied server stays denied too (it always was).
        assert (
            "permission_denied"
            == (await service.call("secret__tpl_note", {"owner": "alice", "note_id": "1"})).error_kind
        )


async def test_a_rule_denying_every_mcp_server_to_one_agent_shuts_them_for_that_agent_only(workspace: Path) -> None:
    async with runtime(workspace, '[agents.guest.tool_permissions.overrides]\n"*__*" = "deny"\n') as rt:
        guest = rt.tool_service(agent="guest")
        assert {"resources": set(), "templates": set(), "prompts": set()} == await servers_seen(guest)
        assert not (await guest.call("mcp_read_resource", {"uri": "open:notes://readme"})).success
        both = {"open", "secret"}
        assert {"resources": both, "templates": both, "prompts": both} == await servers_seen(rt.tool_service())


async def test_a_rule_on_some_tools_of_a_server_leaves_its_resources_and_prompts(workspace: Path) -> None:
    rules = '[policies.tool_permissions.overrides]\n"secret__tpl_*" = "deny"\n"secret__x" = "deny"\n'
    async with runtime(workspace, rules) as rt:
        service = rt.tool_service()
        both = {"open", "secret"}
        assert {"resources": both, "templates": both, "prompts": both} == await servers_seen(service)
        assert (await service.call("mcp_get_prompt", {"name": "secret:review", "arguments": {"code": "x"}})).success


async def test_a_login_to_a_denied_server_answers_like_a_missing_server(workspace: Path) -> None:
    from aleph._mcp._captools import build_capability_tool

    (workspace / "aleph.toml").write_text(
        '[mcp.servers.secret]\nurl = "http://127.0.0.1:9/mcp"\nenabled = false\n'
        '[mcp.servers.open]\nurl = "http://127.0.0.1:9/mcp"\nenabled = false\n' + DENIED
    )
    async with aleph.load(workspace / "aleph.toml", workspace=workspace, entry_points=False) as rt:
        rt.register(build_capability_tool(rt.mcp, "mcp_login"))  # offered while a remote server is up
        service = rt.tool_service()
        denied = await service.call("mcp_login", {"server": "secret"})
        missing = await service.call("mcp_login", {"server": "nosuch"})
        assert not denied.success and (denied.error or "").replace("secret", "<id>") == (missing.error or "").replace(
            "nosuch", "<id>"
        )
        allowed = await service.call("mcp_login", {"server": "open"})  # reached: refused for its own reason
        assert not allowed.success and "not found" not in (allowed.error or "")
